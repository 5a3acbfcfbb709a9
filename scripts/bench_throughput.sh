#!/usr/bin/env bash
# Every throughput figure of BENCHMARKS.md, one script after another, results in
# benchmarks/results/ (run inside the project's environment: `. .venv/bin/activate`):
#   env steps/s, rollout / raw generation, learner / plain PyTorch, gateway overhead per call.
set -euo pipefail
cd "$(dirname "$0")/.."
out=benchmarks/results
python scripts/bench_env.py --episodes 1000 --out "$out/bench_env.json"
python scripts/bench_rollout.py --episodes 32 --max-new-tokens 64 --out "$out/bench_rollout.json"
python scripts/bench_learner.py --model smollm2-135m --out "$out/bench_learner.json"
python scripts/bench_gateway.py --requests 32 --max-new-tokens 16 --out "$out/bench_gateway.json"
