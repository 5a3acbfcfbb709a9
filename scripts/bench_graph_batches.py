"""How the gateway batches a graph's calls: the SQL graph's episodes played together, as RL plays
them, under each batching setting; the batches each gateway served, their sizes and seconds.

    python scripts/bench_graph_batches.py [--model PATH] [--tasks 8] [--session-wait-s 0.01 0.25]

A rollout hands every episode's graph to the framework adapter at once; the graph runs write ->
execute -> check -> (rewrite -> execute -> check)... in each episode, and each model call is an
HTTP request to the gateway of its node. Episodes that advance together send their calls in
waves (all writers, then all checkers, ...); a wave the gateway cuts into several batches costs
several generations in a row. The adapter opens each episode's session on all its gateways
(``open_linked_session``), so a gateway's batch waits until every open session has a call
pending somewhere, at most ``session_wait_s``; 0.01 s is the old plain window's 10 ms (the
batch then waits at most that long, as before sessions counted). Per-node gateways
(``--gateways per-node``, RL's layout with one adapter per node: the writer's, the
rewriter's and the frozen checker's) each have their own batcher; ``one`` puts every node
behind one gateway (``boltzoo rollout``'s layout).

Each setting plays the same tasks with the same seed, one after the other (the first setting
also once before, untimed: allocator warm-up); the model's answers are sampled, so calls per
episode differ a little between settings and are printed with the times.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from pathlib import Path
from typing import Any

from benchlib import write_record
from boltzoo.agents import gateway as gateway_module
from boltzoo.agents.examples import langgraph_sql_graph
from boltzoo.agents.frameworks import LangGraphPolicy
from boltzoo.agents.gateway import Gateway
from boltzoo.agents.models import load_policy
from boltzoo.rollout import rollout

NODES = ("writer", "checker", "rewriter")


class BatchLog:
    """Every batch a gateway's batcher serves: (gateway label, size, start, end)."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, int, float, float]] = []
        self.labels: dict[int, str] = {}
        self.lock = threading.Lock()
        serve = gateway_module._Batcher._serve

        def timed_serve(batcher: Any, batch: list[Any]) -> None:
            started = time.perf_counter()
            serve(batcher, batch)
            with self.lock:
                label = self.labels.get(id(batcher), "?")
                self.rows.append((label, len(batch), started, time.perf_counter()))

        gateway_module._Batcher._serve = timed_serve  # type: ignore[method-assign]

    def name(self, gateway: Gateway, label: str) -> None:
        for batcher in gateway._batchers.values():
            self.labels[id(batcher)] = label


def play(
    models: dict[str, Any], wait_s: float, tasks: list[int], args: argparse.Namespace, log: BatchLog
) -> dict[str, Any]:
    """Play the graph on ``tasks`` x group size with gateways batching at ``wait_s``; return
    the figures of the run."""
    gateways = {
        node: Gateway(models[node], model_name=node, session_wait_s=wait_s).start()
        for node in models
    }
    try:
        for node, gateway in gateways.items():
            log.name(gateway, node if args.gateways == "per-node" else "all")
        node_gateways = {node: gateways[node if node in gateways else "all"] for node in NODES}
        graph = LangGraphPolicy(
            langgraph_sql_graph("sql-v0", "writer"),
            node_gateways["writer"],
            node_gateways=node_gateways,
        )
        first = len(log.rows)
        started = time.perf_counter()
        episodes = rollout(
            "sql-v0",
            {"writer": graph},
            tasks=tasks,
            group_size=args.group_size,
            seed=args.seed,
            progress=False,
            env_kwargs={"agents": ["writer"], "schema_rows": 0, "split": "train"},
        )
        seconds = time.perf_counter() - started
    finally:
        for gateway in gateways.values():
            gateway.close()
    batches = log.rows[first:]
    calls = sum(size for _, size, _, _ in batches)
    busy = sum(end - start for _, _, start, end in batches)
    by_gateway = {}
    for label in dict.fromkeys(label for label, _, _, _ in batches):
        sizes = [size for name, size, _, _ in batches if name == label]
        by_gateway[label] = {"batches": len(sizes), "calls": sum(sizes), "sizes": sizes}
    return {
        "session_wait_s": wait_s,
        "gateways": args.gateways,
        "episodes": len(episodes),
        "seconds": seconds,
        "success": statistics.mean(float(e.success) for e in episodes),
        "calls_per_episode": calls / len(episodes),
        "batches": len(batches),
        "mean_batch_size": calls / max(1, len(batches)),
        "batcher_busy_seconds": busy,
        "by_gateway": by_gateway,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m", help="a name or a merged model folder")
    parser.add_argument("--tasks", type=int, default=8, help="train tasks (0, 1, ...)")
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    parser.add_argument("--gateways", choices=["one", "per-node"], default="per-node")
    parser.add_argument("--session-wait-s", type=float, nargs="+", default=[0.01, 0.25])
    parser.add_argument("--rounds", type=int, default=2, help="each setting this many times")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="also write the results as JSON")
    args = parser.parse_args()

    import torch

    torch.manual_seed(args.seed)

    def model() -> Any:
        policy = load_policy(
            args.model, max_new_tokens=args.max_new_tokens, temperature=args.temperature
        )
        if args.precision == "bf16":
            policy.model.to(torch.bfloat16)
        return policy

    if args.gateways == "per-node":
        # RL's layout: the writer's and the rewriter's samplers, the checker on the frozen one
        models = {node: model() for node in NODES}
    else:
        models = {"all": model()}
    log = BatchLog()
    tasks = list(range(args.tasks))
    play(models, args.session_wait_s[0], tasks[:2], args, log)  # warm-up, untimed
    rows = []
    for round_ in range(args.rounds):  # A B, B A, ...: neither always on the warmer machine
        order = args.session_wait_s if round_ % 2 == 0 else args.session_wait_s[::-1]
        for wait_s in order:
            torch.manual_seed(args.seed)
            row = play(models, wait_s, tasks, args, log) | {"round": round_}
            rows.append(row)
            sizes = {label: g["sizes"] for label, g in row["by_gateway"].items()}
            print(
                f"session_wait_s {wait_s}: {row['seconds']:.1f} s for {row['episodes']} "
                f"episodes, {row['calls_per_episode']:.2f} calls an episode in {row['batches']} "
                f"batches (mean {row['mean_batch_size']:.1f}), batchers busy "
                f"{row['batcher_busy_seconds']:.1f} s, success {row['success']:.2f}; "
                f"batch sizes {sizes}",
                flush=True,
            )
    summary = []
    for wait_s in args.session_wait_s:
        mine = [r for r in rows if r["session_wait_s"] == wait_s]
        summary.append(
            {
                "session_wait_s": wait_s,
                "seconds": statistics.mean(r["seconds"] for r in mine),
                "batches": statistics.mean(r["batches"] for r in mine),
                "calls_per_episode": statistics.mean(r["calls_per_episode"] for r in mine),
                "mean_batch_size": statistics.mean(r["mean_batch_size"] for r in mine),
            }
        )
    for row in summary:
        print(
            f"session_wait_s {row['session_wait_s']}: mean {row['seconds']:.1f} s a rollout, "
            f"{row['batches']:.1f} batches (mean size {row['mean_batch_size']:.1f}), "
            f"{row['calls_per_episode']:.2f} calls an episode; "
            f"{summary[0]['seconds'] / row['seconds']:.2f}x the first setting's speed"
        )
    if args.out:
        write_record(args.out, summary, model=args.model, temperature=args.temperature, runs=rows)


if __name__ == "__main__":
    main()
