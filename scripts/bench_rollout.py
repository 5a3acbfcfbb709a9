"""Rollout throughput against the backend's raw batched generation, in one run.

    python scripts/bench_rollout.py [--model smollm2-135m] [--episodes 32] [--max-new-tokens 64]

Both sides sample the same prompts (math-v0's first solver turns) with the same batch, sampling
parameters and seed, so they produce the same tokens: the raw side calls the transformers
backend on token ids directly; the rollout side runs the envs, observations, chat template,
batching and records around it. Runs alternate (raw, rollout, raw, ...) and the medians are
compared. The aim: rollout tokens/s at least 0.9 of raw.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import boltzoo
from benchlib import write_record
from boltzoo.agents.models import load_policy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None, help="also write the results as JSON")
    args = parser.parse_args()

    policy = load_policy(args.model, max_new_tokens=args.max_new_tokens, temperature=1.0, seed=0)
    env = boltzoo.make("math-v0", split="test", max_turns=1)
    prompts = []
    for task in range(args.episodes):
        env.reset(options={"task_index": task})
        prompts.append(policy.encode_chat(env.observe("solver")["messages"]))

    raw_rates, rollout_rates, token_counts = [], [], []
    for repeat in range(args.repeats):
        policy.generator.manual_seed(repeat)
        started = time.perf_counter()
        raw = policy.generate_from_ids(prompts)
        raw_tokens = sum(len(c.response_token_ids) for c in raw)
        raw_rates.append(raw_tokens / (time.perf_counter() - started))

        policy.generator.manual_seed(repeat)
        started = time.perf_counter()
        episodes = boltzoo.rollout(
            "math-v0",
            {"solver": policy},
            tasks=range(args.episodes),
            split="test",
            max_turns=1,
            progress=False,
        )
        elapsed = time.perf_counter() - started
        tokens = sum(s.action.num_response_tokens for e in episodes for s in e.steps)
        rollout_rates.append(tokens / elapsed)
        token_counts.append((raw_tokens, tokens))
        same = [c.response_token_ids for c in raw] == [
            e.steps[0].action.response_token_ids for e in episodes
        ]
        print(
            f"repeat {repeat}: raw {raw_rates[-1]:.1f} tok/s, rollout {rollout_rates[-1]:.1f} "
            f"tok/s ({tokens} tokens; same tokens as raw: {same})"
        )
    raw_rate, rollout_rate = statistics.median(raw_rates), statistics.median(rollout_rates)
    ratio = rollout_rate / raw_rate
    print(
        f"{args.model}, batch {args.episodes}, {args.max_new_tokens} new tokens: raw "
        f"{raw_rate:.1f} tok/s, rollout {rollout_rate:.1f} tok/s, ratio {ratio:.3f}"
    )
    if args.out:
        write_record(
            args.out,
            [
                {
                    "model": args.model,
                    "batch": args.episodes,
                    "max_new_tokens": args.max_new_tokens,
                    "raw_tokens_per_s": raw_rate,
                    "rollout_tokens_per_s": rollout_rate,
                    "ratio": ratio,
                    "raw_runs": raw_rates,
                    "rollout_runs": rollout_rates,
                    "tokens": token_counts,
                }
            ],
        )


if __name__ == "__main__":
    main()
