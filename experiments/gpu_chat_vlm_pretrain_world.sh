#!/usr/bin/env bash
# The chat VLM with its vision tower pre-trained on a 20,000-image world, on one GPU
# (docs/chat-vlm.md, "On a GPU" and "Training", pretrain_world): one prepared run for a
# machine with CUDA, PyTorch and transformers but no network, sized for about 6 minutes
# of an H100 at the defaults below.
#
#   1. installs what vqadiag needs beyond such a machine's packages from the wheels in
#      .whl/ (orjson and msgspec for its Python: `pip download --only-binary=:all:
#      --python-version 3.12 --platform manylinux2014_x86_64 --no-deps orjson msgspec
#      -d .whl`), into a folder of its own, and runs vqadiag from src/;
#   2. writes the demo world and a 20,000-image world of another seed;
#   3. times the pre-training data path on the GPU (benchmarks/bench_chat_vlm_pretraining.py,
#      batch 32 and 256);
#   4. trains the chat VLM on the demo world with its tower pre-trained on the other
#      world (the command of docs/chat-vlm.md, "Training", with -o device=cuda), and
#      diagnoses it through hf: with the accuracy and gain suites, on the GPU.
#
# Figures and logs go to $OUT (or ./gpu-out): bench.txt, train.json, train.err,
# diagnose.txt, results.json, and tower.pt, the pre-training's checkpoint, written after
# every epoch (-o pretrain_checkpoint; docs/chat-vlm.md, "Resuming the pre-training").
# PRETRAIN_EPOCHS (default 30: 420,000 images shown) and PRETRAIN_BATCH (default 32)
# change the pre-training; EPOCHS (default 12) the answers; BENCH=0 skips step 3.
# RESUME=FILE starts from a tower.pt an earlier run left (one stopped at the time limit
# of its call), when it was written by the same pre-training.
#
#   device run:  bash experiments/gpu_chat_vlm_pretrain_world.sh   (carry: .whl)
#   the next call:  RESUME=.gpu/tower.pt BENCH=0 bash experiments/...   (carry: .whl, .gpu)
set -euo pipefail

out=${OUT:-gpu-out}
work=${WORK:-/tmp/vqadiag-gpu}
mkdir -p "$out" "$work"
python=${PYTHON:-python3}
if ! "$python" -c "import orjson, msgspec" 2>/dev/null; then
  "$python" -m pip install --quiet --no-index --no-deps --target "$work/site" .whl/*.whl
fi
export PYTHONPATH="$PWD/src:$work/site${PYTHONPATH:+:$PYTHONPATH}"
vqadiag() { "$python" -m vqadiag "$@"; }

device=${DEVICE:-cuda}
: >"$out/device.txt"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee -a "$out/device.txt"
fi
"$python" -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" | tee -a "$out/device.txt"

start=$(date +%s)
vqadiag synth --out "$work/world" --images "${IMAGES:-2000}" -q
vqadiag synth --out "$work/world20k" --images "${PRETRAIN_IMAGES:-20000}" --seed 1 -q
echo "worlds: $(( $(date +%s) - start )) s" | tee -a "$out/device.txt"

if [ "${BENCH:-1}" != 0 ]; then
  for batch in 32 256; do
    "$python" benchmarks/bench_chat_vlm_pretraining.py --world "$work/world20k" \
      --device "$device" --batch "$batch" --repeats 1 | tee -a "$out/bench.txt"
  done
fi

if [ -n "${RESUME:-}" ]; then
  cp "$RESUME" "$out/tower.pt"
fi

start=$(date +%s)
vqadiag train --model chat-vlm --data "$work/world" --out "$work/runs/chat-20k" \
  --epochs "${EPOCHS:-12}" -o pretrain_world="$work/world20k" \
  -o pretrain_epochs="${PRETRAIN_EPOCHS:-30}" -o pretrain_batch_size="${PRETRAIN_BATCH:-32}" \
  -o pretrain_lr=0.003 -o pretrain_augment=true -o pretrain_object_loss=1 -o batch_size=32 \
  -o threads=1 -o question_first=true -o device="$device" -o pretrain_checkpoint="$out/tower.pt" \
  --json >"$out/train.json" 2>"$out/train.err"
echo "train: $(( $(date +%s) - start )) s" | tee -a "$out/device.txt"

start=$(date +%s)
vqadiag diagnose --data "$work/world" --model "hf:$work/runs/chat-20k/model" --device "$device" \
  --out "$work/results" --suite accuracy,gain -q | tee "$out/diagnose.txt"
echo "diagnose: $(( $(date +%s) - start )) s" | tee -a "$out/device.txt"
cp "$work/results/results.json" "$out/results.json"
