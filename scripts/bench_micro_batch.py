"""The learner's memory and speed against its micro-batch size, on one real training step.

    python scripts/bench_micro_batch.py runs/rag/rl-long --tokens 8192 2048 1024 \
        --out benchmarks/results/micro_batch.json

Copies a run folder, resumes it from its latest checkpoint and takes one training step with
each ``micro_batch_tokens`` value, each in a fresh process (so each peak is its own): the same
step, seed and rollout every time, only the update's micro-batching differs. Prints, per value,
the update's seconds and the process's peak resident memory, and the ratios against the first
value.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from benchlib import write_record


def one_step(run: Path, tokens: int) -> dict[str, float]:
    """Resume ``run`` and take one step with ``tokens`` per micro-batch (in this process)."""
    from boltzoo.lightningrl.config import TrainerConfig
    from boltzoo.lightningrl.trainer import Trainer

    values = json.loads((run / "config.json").read_text())
    config = TrainerConfig(**values | {"micro_batch_tokens": tokens, "progress": False})
    with Trainer(config) as trainer:
        if not trainer.resume():
            raise SystemExit(f"{run} has no checkpoint to resume")
        metrics = trainer.train_step()
    return {
        "micro_batch_tokens": tokens,
        "step": metrics["step"],
        "transitions": metrics["transitions"],
        "update_seconds": metrics["update_seconds"],
        "peak_rss_mib": metrics["peak_rss_mib"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a run folder with a checkpoint")
    parser.add_argument("--tokens", type=int, nargs="+", default=[8192, 2048, 1024])
    parser.add_argument("--out", type=Path, default=None, help="also write the results as JSON")
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)  # a child
    args = parser.parse_args()

    if args.one is not None:
        print(json.dumps(one_step(args.run, args.one)))
        return
    rows = []
    for tokens in args.tokens:
        with tempfile.TemporaryDirectory() as folder:
            copy = Path(folder) / "run"
            shutil.copytree(args.run, copy)
            config = json.loads((copy / "config.json").read_text())
            (copy / "config.json").write_text(json.dumps(config | {"output_dir": str(copy)}))
            child = [sys.executable, __file__, str(copy), "--one", str(tokens)]
            out = subprocess.run(child, check=True, capture_output=True, text=True).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    base = rows[0]
    for row in rows:
        row["speed_vs_first"] = base["update_seconds"] / row["update_seconds"]
        row["memory_vs_first"] = row["peak_rss_mib"] / base["peak_rss_mib"]
        print(
            f"{row['micro_batch_tokens']:>6} tokens: update {row['update_seconds']:.0f} s "
            f"({row['speed_vs_first']:.2f}x), peak {row['peak_rss_mib'] / 1024:.1f} GiB "
            f"({row['memory_vs_first']:.2f}x)"
        )
    if args.out:
        write_record(args.out, rows, run=str(args.run))


if __name__ == "__main__":
    main()
