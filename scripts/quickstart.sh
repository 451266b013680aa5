#!/usr/bin/env bash
# The main job on a fresh machine: install vqadiag (light core, no PyTorch), score the
# shipped VQA v2 example on every prediction-file protocol it has, then generate a
# small synthetic world in the real GQA / VQA v2 / VQA-introspect formats and describe it.
# Outputs go to ./vqadiag-demo (override with VQADIAG_OUT).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${VQADIAG_OUT:-vqadiag-demo}"
python3 -m pip install --quiet --disable-pip-version-check -e .
ex=examples/vqa2_tiny
echo "== vqadiag score vqa (official VQA v2 accuracy) =="
vqadiag score vqa --questions "$ex/questions.json" --annotations "$ex/annotations.json" \
  --predictions "$ex/predictions.json"
echo "== vqadiag score pairs (complementary pairs) =="
vqadiag score pairs --annotations "$ex/annotations.json" --pairs "$ex/pairs.json" \
  --predictions "$ex/predictions.json"
echo "== vqadiag synth + stats (synthetic world, 300 images) =="
vqadiag synth --out "$out/world" --images 300 --seed 0
vqadiag stats "$out/world"
