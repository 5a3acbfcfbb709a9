"""How the SQL graph's checker judges, from recorded episodes: its verdicts against the truth.

    boltzoo rollout sql-v0 --policy langgraph-sql-graph --model OUT --split test \\
        --episodes 100 --temperature 0 -e 'agents=["writer"]' -e schema_rows=0 \\
        --max-new-tokens 96 --out runs/graph-test.jsonl
    python scripts/probe_checker.py runs/graph-test.jsonl

Reads the episodes' model calls (each recorded step's ``inner_calls``, node by node) and, for
every checker call, runs the query under review (the last writer or rewriter query before it)
through the env's oracle checker (``oracle_call``: the query's rows against the gold rows), so
each verdict is counted as right or wrong; a rewriter call counts as a fix when the rejected
query was wrong and its rewrite is right. Prints, by review round: the queries right and wrong
under review, the checker's CORRECT/INCORRECT on each, and the rewrites that fixed a query.
No model is loaded; the env only runs queries. Works on review demonstrations too (their
checker is the oracle: every verdict right).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

import boltzoo
from boltzoo.envs.protocol import extract_sql, parse_verdict

CHECKER, QUERY_NODES = "checker", ("writer", "rewriter")


def model_calls(episode: dict[str, Any]) -> list[dict[str, Any]]:
    """Return an episode's model calls in order (the framework's inner calls of each step)."""
    calls = []
    for step in episode["steps"]:
        action = step.get("action") or {}
        calls.extend(action.get("inner_calls") or [])
    return calls


def query_is_right(env: Any, sql: str) -> bool:
    """Whether ``sql`` answers the env's current task (the oracle checker's verdict on it)."""
    chat = [{"role": "user", "content": f"```sql\n{sql}\n```\n\nResult:"}]
    return parse_verdict(env.unwrapped.oracle_call(CHECKER, chat))[0]


def probe(paths: list[Path], env_kwargs: dict[str, Any]) -> dict[str, Any]:
    """Count the checker's verdicts by round and truth, and the rewriter's fixes."""
    verdicts: Counter[tuple[int, str, str]] = Counter()
    rewrites: Counter[str] = Counter()
    episodes = successes = 0
    env = boltzoo.make("boltzoo/sql-v0", **env_kwargs)
    for path in paths:
        for line in path.read_text().splitlines():
            episode = json.loads(line)
            env.reset(options={"task_index": episode["task_index"]})
            episodes += 1
            successes += bool(episode.get("success"))
            under_review: str | None = None
            right_before = False
            rounds = 0
            for call in model_calls(episode):
                node = call.get("node")
                if node in QUERY_NODES:
                    under_review = extract_sql(call["text"])
                    right = query_is_right(env, under_review)
                    if node == "rewriter":
                        rewrites["fixed" if right and not right_before else
                                 "broke" if right_before and not right else
                                 "still right" if right else "still wrong"] += 1  # fmt: skip
                    right_before = right
                elif node == CHECKER and under_review is not None:
                    accepted = parse_verdict(call["text"])[0]
                    truth = "right" if right_before else "wrong"
                    verdicts[(rounds, truth, "CORRECT" if accepted else "INCORRECT")] += 1
                    rounds += 1
    env.close()
    return {
        "episodes": episodes,
        "success_rate": successes / max(episodes, 1),
        "verdicts": {f"round {r}, query {t}, {v}": n for (r, t, v), n in sorted(verdicts.items())},
        "rewrites": dict(rewrites),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("episodes", nargs="+", type=Path, help="Episode JSONL files")
    parser.add_argument(
        "--env-kwargs",
        default='{"agents": ["writer"], "schema_rows": 0}',
        help="JSON: the env's arguments (the split: --split)",
    )
    parser.add_argument("--split", default="train", help="the episodes' split")
    args = parser.parse_args()
    env_kwargs = json.loads(args.env_kwargs) | {"split": args.split}
    result = probe(args.episodes, env_kwargs)
    print(f"{result['episodes']} episodes, success {result['success_rate']:.1%}")
    for key, count in result["verdicts"].items():
        print(f"{key}: {count}")
    print("rewrites: " + ", ".join(f"{k}: {n}" for k, n in sorted(result["rewrites"].items())))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
