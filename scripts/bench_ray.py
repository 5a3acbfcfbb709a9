"""Rollouts on Ray workers against rollouts in this process, and what a weight sync costs.

This machine has 2 cores, so more workers cannot make sampling faster here: what this measures
is what the workers cost, to be weighed against the cores a cluster adds.

1. Overhead per episode: math-v0 with the oracle (no model, so the time is the env and the
   rollout machinery), ``--episodes`` episodes in process, then on 1 and 2 workers (workers
   started and the policy installed beforehand; both reported apart).
2. A model: SmolLM2-135M-Instruct (a bf16 copy, the trainer's sampler) on ``--model-episodes``
   easy math-v0 episodes (two turns, 48 tokens each), in process and on 1 and 2 workers.
3. A weight sync: the merged weights of SmolLM2-135M (bf16 and fp32) put once in Ray's object
   store and loaded by every worker's sampler (``WorkerPool.load_weights``): seconds and bytes.

    python scripts/bench_ray.py --out benchmarks/results/bench_ray.json
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

import boltzoo
from benchlib import write_record
from boltzoo.agents.models import load_model
from boltzoo.agents.scripted import OraclePolicy
from boltzoo.agents.transformers_policy import TransformersPolicy
from boltzoo.rollout import WorkerPool, connect_ray

ENV_KWARGS = {"level": "easy", "max_turns": 3, "few_shot": False}


def timed_rollout(policy, episodes: int, pool: WorkerPool | None) -> float:
    """Seconds to play ``episodes`` episodes (tasks 0..episodes-1) here or on ``pool``."""
    tasks = list(range(episodes))
    started = time.perf_counter()
    if pool is None:
        done = boltzoo.rollout(
            "math-v0", {"solver": policy}, tasks=tasks, progress=False, **ENV_KWARGS
        )
    else:
        done = pool.rollout("math-v0", tasks=tasks, progress=False, **ENV_KWARGS)
    seconds = time.perf_counter() - started
    assert len(done) == episodes and not any(e.failed for e in done), "a rollout failed"
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=512, help="oracle episodes")
    parser.add_argument("--model-episodes", type=int, default=32, help="SmolLM2 episodes")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/bench_ray.json"))
    args = parser.parse_args()

    started = time.perf_counter()
    connect_ray(None)
    ray_start_s = time.perf_counter() - started
    model, tokenizer = load_model("smollm2-135m", device="cpu")
    sampler = TransformersPolicy(
        model.to(torch.bfloat16), tokenizer, name="smollm2-bf16", max_new_tokens=48, temperature=1.0
    )
    oracle = OraclePolicy()

    rows = []
    timed_rollout(oracle, 8, None)  # warm-up: the envs' first imports and data
    here = timed_rollout(oracle, args.episodes, None)
    here_model = timed_rollout(sampler, args.model_episodes, None)
    rows.append(
        dict(workers=0, oracle_episodes_per_s=args.episodes / here,
             model_episodes_per_s=args.model_episodes / here_model)
    )  # fmt: skip
    for workers in args.workers:
        t0 = time.perf_counter()
        pool = WorkerPool(workers)
        pool.pids()
        start_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        pool.install({"oracle": oracle}, {"solver": "oracle"})
        timed_rollout(oracle, 2 * workers, pool)  # the workers import the envs
        install_oracle_s = time.perf_counter() - t0
        there = timed_rollout(oracle, args.episodes, pool)
        t0 = time.perf_counter()
        pool.install({"model": sampler}, {"solver": "model"})
        install_model_s = time.perf_counter() - t0
        there_model = timed_rollout(sampler, args.model_episodes, pool)
        syncs = {}
        for dtype in (torch.bfloat16, torch.float32):
            weights = {"model": {k: v.to(dtype) for k, v in model.state_dict().items()}}
            pool.load_weights(weights, version=1)  # untimed: the first put of this size
            t0 = time.perf_counter()
            pool.load_weights(weights, version=2)
            syncs[str(dtype).removeprefix("torch.")] = dict(
                seconds=round(time.perf_counter() - t0, 3), bytes=pool.bytes_per_sync
            )
        pool.close()
        row = dict(
            workers=workers,
            pool_start_s=round(start_s, 2),
            install_oracle_s=round(install_oracle_s, 2),
            install_model_s=round(install_model_s, 2),
            oracle_episodes_per_s=args.episodes / there,
            overhead_ms_per_episode=1000 * (there - here) / args.episodes,
            model_episodes_per_s=args.model_episodes / there_model,
            model_ratio_vs_in_process=here_model / there_model,
            sync=syncs,
        )
        rows.append(row)
        print(row, flush=True)
    for row in rows:
        for key in ("oracle_episodes_per_s", "model_episodes_per_s"):
            row[key] = round(row[key], 2)
        for key in ("overhead_ms_per_episode", "model_ratio_vs_in_process"):
            if key in row:
                row[key] = round(row[key], 3)
    write_record(
        args.out,
        rows,
        ray_start_s=round(ray_start_s, 2),
        oracle_episodes=args.episodes,
        model_episodes=args.model_episodes,
        env_kwargs=ENV_KWARGS,
    )
    print(f"in process: {rows[0]}")


if __name__ == "__main__":
    main()
