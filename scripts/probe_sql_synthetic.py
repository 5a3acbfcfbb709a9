"""Does a sql-v0 writer read schemas it never trained on? Greedy success on synthetic databases
past those of its training env.

    python scripts/probe_sql_synthetic.py runs/sql-rl-r11/export runs/sql-rl-r13/export \\
        --trained-on 100 --databases 20 --tasks 84

An RL run with ``synthetic_databases=N`` practises on synthetic databases ``0 .. N-1``; the
databases ``N .. N+databases-1`` come from the same generator (``--tables``: two or four
tables; ``--kinds``: the run's ``synthetic_kinds``, the same question kinds) but their schemas,
rows and questions are new to it. For each model: greedy success and how many of its queries
run at all, in total and per question kind, on ``--tasks`` tasks spread over those databases
(the same tasks for every model).
Prints one JSON line per model.
"""

from __future__ import annotations

import argparse
import json
import re

import boltzoo
from boltzoo.agents.models import load_policy


def held_out_tasks(
    trained_on: int, databases: int, tasks: int, tables: int = 2, kinds: str = "base"
) -> tuple[dict, list[int], list[str]]:
    """Return the env keyword arguments, the task indices of the held-out databases and each
    one's question kind."""
    env_kwargs = {
        "split": "train",
        "agents": ["writer"],
        "schema_rows": 0,
        "synthetic_databases": trained_on + databases,
        "synthetic_tables": tables,
        "synthetic_kinds": kinds,
    }
    env = boltzoo.make("sql-v0", **env_kwargs).unwrapped
    # synthetic db_ids are "synthetic<index>" (two tables) or "synthetic<index>t4"
    index = [re.match(r"synthetic(\d+)", t.db_id) for t in env.tasks]
    pool = [i for i, m in enumerate(index) if m and int(m.group(1)) >= trained_on]
    indices = pool[:: max(1, len(pool) // tasks)][:tasks]
    kinds = [env.tasks[i].template.removeprefix("synthetic/") for i in indices]
    return env_kwargs, indices, kinds


def probe(
    model: str, env_kwargs: dict, indices: list[int], kinds: list[str], max_new_tokens: int
) -> dict:
    """Play ``indices`` (of question ``kinds``) greedily with ``model`` as the writer; return
    the figures."""
    policy = load_policy(model, max_new_tokens=max_new_tokens, temperature=0.0)
    episodes = boltzoo.rollout(
        "sql-v0", {"writer": policy}, tasks=indices, progress=False, **env_kwargs
    )
    kind_of = dict(zip(indices, kinds, strict=True))
    by_kind: dict[str, list[int]] = {}
    for episode in episodes:
        kind = kind_of[episode.task_index]
        right, total = by_kind.get(kind, [0, 0])
        by_kind[kind] = [right + int(episode.success), total + 1]
    runs = sum(e.steps[0].info.get("query_errors", 0) == 0 for e in episodes)
    success = sum(e.success for e in episodes)
    return {
        "model": model,
        "tasks": len(episodes),
        "success": success,
        "runs": runs,
        "by_kind": by_kind,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+", help="transformers folders (boltzoo export)")
    parser.add_argument("--trained-on", type=int, default=100, help="the run's synthetic_databases")
    parser.add_argument("--databases", type=int, default=20, help="held-out databases to ask")
    parser.add_argument("--tasks", type=int, default=84)
    parser.add_argument("--tables", type=int, default=2, help="the run's synthetic_tables")
    parser.add_argument("--kinds", default="base", help="the run's synthetic_kinds")
    parser.add_argument("--max-new-tokens", type=int, default=96)
    args = parser.parse_args()
    env_kwargs, indices, kinds = held_out_tasks(
        args.trained_on, args.databases, args.tasks, args.tables, args.kinds
    )
    for model in args.models:
        print(json.dumps(probe(model, env_kwargs, indices, kinds, args.max_new_tokens)), flush=True)


if __name__ == "__main__":
    main()
