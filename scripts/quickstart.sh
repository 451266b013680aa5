#!/usr/bin/env bash
# The main job on a fresh machine, end to end:
#   1. install vqadiag with its PyTorch models (the CPU build of torch first);
#   2. score the shipped VQA v2 example (official accuracy, complementary pairs);
#   3. generate a synthetic world in the real GQA / VQA v2 / VQA-introspect formats;
#   4. train a blind prior and the grounded symbolic model on it, answer its val split,
#      and score both with GQA's official metrics and GQA-OOD head / tail.
# Outputs go to ./vqadiag-demo (override with VQADIAG_OUT). About a minute on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${VQADIAG_OUT:-vqadiag-demo}"
python3 -m pip install --quiet --disable-pip-version-check "torch==2.13.0"
python3 -m pip install --quiet --disable-pip-version-check -e ".[torch]"
ex=examples/vqa2_tiny
echo "== vqadiag score vqa (official VQA v2 accuracy) =="
vqadiag score vqa --questions "$ex/questions.json" --annotations "$ex/annotations.json" \
  --predictions "$ex/predictions.json"
echo "== vqadiag score pairs (complementary pairs) =="
vqadiag score pairs --annotations "$ex/annotations.json" --pairs "$ex/pairs.json" \
  --predictions "$ex/predictions.json"
echo "== vqadiag synth + stats (synthetic world, 1000 images) =="
vqadiag synth --out "$out/world" --images 1000 --seed 0
vqadiag stats "$out/world"
for model in prior symbolic; do
  echo "== vqadiag train / predict / score: $model =="
  vqadiag train --data "$out/world" --model "$model" --out "$out/runs/$model"
  vqadiag predict --model "$out/runs/$model" --data "$out/world" --split val \
    --out "$out/predictions/$model-val.json"
  vqadiag score gqa --questions "$out/world/gqa/val_balanced_questions.json" \
    --predictions "$out/predictions/$model-val.json" --choices "$out/world/gqa/val_choices.json"
  vqadiag score ood --questions "$out/world/gqa/val_balanced_questions.json" \
    --predictions "$out/predictions/$model-val.json"
done
