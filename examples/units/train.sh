#!/usr/bin/env bash
# The demo's recipe on examples/units-v0 (an env of your own): untrained -> warm start -> RL,
# held-out success on its 100 test rows (greedy), curves as PNGs.
#   pip install -e examples/units && bash examples/units/train.sh [SEED] [DIR]
set -euo pipefail
SEED="${1:-0}"
DIR="${2:-runs/units-s$SEED}"
mkdir -p "$DIR"
# 1. demonstrations: the rows' oracle solutions (a tool call, then the answer)
boltzoo rollout examples/units-v0 --policy oracle --split train --episodes 16 --seed "$SEED" \
  --out "$DIR/demos.jsonl" --quiet
# 2. the warm start: one epoch of SFT on them (LoRA r=16); evaluates before and after (run
#    again, the script keeps a finished warm start)
if [ ! -f "$DIR/sft/checkpoints/latest" ]; then
  boltzoo sft examples/units-v0 --model smollm2-135m --demos "$DIR/demos.jsonl" \
    --output-dir "$DIR/sft" --seed "$SEED" --epochs 1 --batch-size 4 --lr 5e-4 \
    --lora-r 16 --lora-alpha 32 --eval-tasks 100 --max-new-tokens 64 --overwrite
fi
# 3. RL from there: 40 steps of 8 tasks x 4 samples, held-out evaluation every 5
boltzoo train examples/units-v0 --model smollm2-135m --init-from "$DIR/sft" \
  --output-dir "$DIR/rl" --resume --seed "$SEED" --steps 40 \
  --tasks-per-step 8 --group-size 4 --max-new-tokens 64 --temperature 1.0 --lr 1e-4 \
  --lora-r 16 --lora-alpha 32 --sampler copy --sampler-precision bf16 --precision bf16 \
  --eval-every 5 --eval-tasks 100 --save-every 5 "${@:3}"
boltzoo plot "$DIR/sft" >/dev/null
boltzoo plot "$DIR/rl"
