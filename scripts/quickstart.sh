#!/usr/bin/env bash
# The main job on a fresh machine, end to end:
#   1. install vqadiag with its PyTorch models and transformers (the CPU build of torch
#      first);
#   2. vqadiag demo: generate a synthetic world in the real GQA / VQA v2 /
#      VQA-introspect formats, train the prior, question-only, UpDn, symbolic and pixel
#      models and a small chat VLM (in a second process), diagnose each with every suite
#      and write the comparison report.
# Outputs go to ./vqadiag-demo (override with VQADIAG_OUT); extra arguments go to
# `vqadiag demo` (e.g. --size medium, --no-chat-vlm). About 9 minutes on 2 cores; rerun
# to resume.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${VQADIAG_OUT:-vqadiag-demo}"
python3 -m pip install --quiet --disable-pip-version-check "torch==2.13.0"
python3 -m pip install --quiet --disable-pip-version-check -e ".[torch,hf]"
vqadiag demo --out "$out" "$@"
echo "report: $out/report/report.html"
