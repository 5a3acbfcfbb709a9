"""Seconds to generate each bundled task set fresh: what an env's first construction costs.

    python scripts/bench_generators.py [--rounds 3] [--out benchmarks/results/bench_generators.json]

Each generator runs with its in-process cache cleared (and a seed no cache holds, where the
generator takes one), ``rounds`` times; the best round is reported with the tasks it made. The
databases (sql-v0) are built once before timing: their build is a one-off, cached on disk.
Goals (were timed tests): a math-v0 pool under 1 s, sql-v0's generated splits under 5 s after
the first build, a fresh rag-v0 world under 3 s.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchlib import write_record
from boltzoo.envs.data import math_tasks, rag_tasks, sql_synthetic, sql_tasks


def math_pool(level: str) -> Callable[[int], int]:
    def run(seed: int) -> int:
        return len(math_tasks.generate_tasks(level, "train", seed=seed))

    return run


def sql_generated(seed: int) -> int:
    sql_tasks._task_pools.cache_clear()
    return len(sql_tasks.generate_tasks("train", seed=seed))


def sql_synthetic_tasks(seed: int) -> int:
    sql_synthetic._tasks.cache_clear()  # (its databases stay built on disk)
    return len(sql_synthetic.synthetic_tasks(6, tables=4, kinds="extended"))


def rag_world(seed: int) -> int:
    return len(rag_tasks._build_world.__wrapped__(seed).tasks)


GENERATORS: dict[str, tuple[Callable[[int], int], float]] = {
    **{f"math-v0 {level} pool": (math_pool(level), 1.0) for level in math_tasks.LEVELS},
    "sql-v0 generated splits": (sql_generated, 5.0),
    "sql-v0 synthetic (6 four-table databases)": (sql_synthetic_tasks, 5.0),
    "rag-v0 world": (rag_world, 3.0),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    out = Path("benchmarks/results/bench_generators.json")
    parser.add_argument("--out", type=Path, default=out)
    args = parser.parse_args()
    sql_tasks.generate_tasks("train")  # the databases, built once (a one-off, cached on disk)
    sql_synthetic.synthetic_tasks(6, tables=4, kinds="extended")
    rows: list[dict[str, Any]] = []
    for name, (generate, goal_s) in GENERATORS.items():
        times, count = [], 0
        for round_ in range(args.rounds):
            started = time.perf_counter()
            count = generate(987_654 + round_)  # seeds no other run caches
            times.append(time.perf_counter() - started)
        best = min(times)
        rows.append({"generator": name, "tasks": count, "best_s": round(best, 3), "goal_s": goal_s})
        print(f"{name:45s} {count:6d} tasks  {best:6.3f} s  (goal < {goal_s:g} s)", flush=True)
    write_record(args.out, rows, rounds=args.rounds)


if __name__ == "__main__":
    main()
