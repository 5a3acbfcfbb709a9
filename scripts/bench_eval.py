"""Every env's bundled test split against every policy given: success, mean score, tokens/s.

    python scripts/bench_eval.py --policies oracle naive smollm2-135m autogen:smollm2-135m \
        --episodes 64 --out benchmarks/results/bench_eval.json

Each cell is one ``boltzoo eval ENV ... --json`` run (the command line is the one way to
evaluate; this script only loops over it). A policy is a scripted one (``oracle``, ``naive``),
a model (``smollm2-135m`` or a local transformers folder, e.g. a ``boltzoo export``), or a
framework agent over a model (``autogen:MODEL``, ``openai-agents:MODEL``) talking to the model
through the gateway. Models decode greedily with ``--max-new-tokens``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from benchlib import write_record

ENVS = {
    "math-v0": ["-e", "level=easy"],
    "sql-v0": [],
    "rag-v0": [],
}
SCRIPTED = ("oracle", "naive")
FRAMEWORKS = ("autogen", "openai-agents")


def eval_command(env: str, policy: str, episodes: int, max_new_tokens: int) -> list[str]:
    """Return the ``boltzoo eval`` command line of one cell."""
    command = [sys.executable, "-m", "boltzoo.cli", "eval", env, "--json", "--quiet"]
    command += ["--episodes", str(episodes), "--split", "test", *ENVS[env]]
    framework, _, model = policy.partition(":")
    if policy in SCRIPTED:
        command += ["--policy", policy]
    elif framework in FRAMEWORKS and model:
        command += ["--policy", framework, "--model", model]
    else:
        command += ["--model", policy]
    if policy not in SCRIPTED:
        command += ["--max-new-tokens", str(max_new_tokens)]
    return command


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policies", nargs="+", default=["oracle", "naive"])
    parser.add_argument("--envs", nargs="+", default=list(ENVS), choices=list(ENVS))
    parser.add_argument("--episodes", type=int, default=64, help="first N test tasks per env")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--out", type=Path, default=None, help="also write the results as JSON")
    args = parser.parse_args()

    rows = []
    print("| env | policy | episodes | success | mean score | tokens/s | seconds |")
    print("|---|---|---|---|---|---|---|")
    for env in args.envs:
        for policy in args.policies:
            command = eval_command(env, policy, args.episodes, args.max_new_tokens)
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
            summary = json.loads(done.stdout.strip().splitlines()[-1])
            rows.append(summary | {"command": " ".join(command[2:])})
            print(
                f"| {env} | {policy} | {summary['episodes']} | {summary['success_rate']:.1%} | "
                f"{summary['mean_score']:.3f} | {summary['tokens_per_second']} | "
                f"{summary['seconds']:.0f} |",
                flush=True,
            )
    if args.out:
        write_record(args.out, rows, max_new_tokens=args.max_new_tokens)


if __name__ == "__main__":
    main()
