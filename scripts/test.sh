#!/usr/bin/env bash
# Set up vqadiag with its test tools and run every check CI runs: ruff, the layer
# contract (import-linter, contracts in pyproject.toml), then pytest.
# Extra arguments go to pytest (e.g. `bash scripts/test.sh -m "not slow"`).
set -euo pipefail
cd "$(dirname "$0")/.."
# The CPU build of PyTorch first: a plain `pip install torch` would pull CUDA packages.
python3 -m pip install --quiet --disable-pip-version-check "torch==2.13.0"
python3 -m pip install --quiet --disable-pip-version-check -e ".[dev,torch,hf,ray,minilm,parquet,datasets,xlsx,openai,serving]"
# Headless Chromium for the report's browser test (Debian's package), when it is missing.
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  sudo_cmd=""
  if [ "$(id -u)" -ne 0 ]; then sudo_cmd="sudo"; fi
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq chromium chromium-driver >/dev/null
fi
# lmms-eval, for the tests that run it on an exported task: in its own virtual environment
# that sees this one's packages (torch, transformers), installed without its dependency
# list, which pulls a CUDA torch through torchvision; only what it imports is added
# (filelock below 4: lmms-eval 0.7 imports filelock._api, which filelock 4 removed).
# 0.7 at least: the tests run both its chat and its simple llava_hf (--force_simple).
lmms_venv="${VQADIAG_LMMS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/vqadiag/lmms-eval-venv}"
lmms_check="import lmms_eval.models.chat.llava_hf, decord, filelock._api"
if [ ! -x "$lmms_venv/bin/python" ] || ! "$lmms_venv/bin/python" -c "$lmms_check" 2>/dev/null; then
  python3 -m venv --system-site-packages "$lmms_venv"
  "$lmms_venv/bin/pip" install --quiet --disable-pip-version-check --no-deps "lmms-eval>=0.7"
  "$lmms_venv/bin/pip" install --quiet --disable-pip-version-check datasets evaluate \
    jsonlines loguru pytablewriter sacrebleu sqlitedict tenacity python-dotenv zss \
    tqdm-multiprocess numexpr decord "filelock>=3.12,<4"
fi
export VQADIAG_LMMS_EVAL_PYTHON="$lmms_venv/bin/python"
python3 -m ruff check src tests benchmarks experiments
lint-imports --no-cache
set +e
python3 -m pytest "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "error: pytest collected no tests" >&2
  exit 1
fi
exit "$status"
