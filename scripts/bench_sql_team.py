"""sql-v0's writer, checker and rewriter, training the writer and the rewriter (the paper's setup).

    python scripts/bench_sql_team.py --minutes 8 --out benchmarks/results/sql_team.json

One ``boltzoo train sql-v0`` run: the writer and the rewriter share one LoRA adapter and learn;
the checker acts with the frozen initial model. The schema is given without example rows
(``schema_rows=0``) and with one check/rewrite round, so that the prompts stay short enough for
the CPU. The writer and the rewriter are also paid ``--tool-reward`` for each query that
executes without error (sql-v0's ``tool_reward``; it never changes the score). Held-out success
(greedy, ``--eval-tasks`` tasks spread over each split) is measured on ``test`` before and after
training (by the run itself) and on ``test_unseen`` (templates and a database training never
saw) by loading the run's config and checkpoint. Writes the figures to ``--out`` and the
training curves to a PNG next to it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchlib import LORA_RUN_ARGS, plot_panels, train, write_record

TRAINED = ("writer", "rewriter")


def train_args(args: argparse.Namespace) -> list[str]:
    """Return the ``boltzoo train`` arguments of the run."""
    env_kwargs = {"schema_rows": 0, "max_rounds": 1, "tool_reward": args.tool_reward}
    return [
        "sql-v0", "--model", args.model, "--env-kwargs", json.dumps(env_kwargs),
        "--train-agents", json.dumps(list(TRAINED)),
        "--max-train-minutes", str(args.minutes), "--max-new-tokens", "96",
        "--eval-every", "1000", "--eval-tasks", str(args.eval_tasks), *LORA_RUN_ARGS,
    ]  # fmt: skip


def held_out(run_dir: Path, split: str) -> dict[str, float]:
    """Evaluate the run's initial and trained policies on ``split``; return both success rates."""
    from boltzoo.lightningrl.config import TrainerConfig
    from boltzoo.lightningrl.trainer import Trainer

    config = TrainerConfig.load(run_dir / "config.json", eval_env_kwargs={"split": split})
    with Trainer(config) as trainer:
        before = trainer.evaluate()
        if not trainer.resume():
            raise RuntimeError(f"{run_dir} holds no checkpoint")
        after = trainer.evaluate()
    return {
        f"{split}_success_before": before["eval_success_rate"],
        f"{split}_success_after": after["eval_success_rate"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--minutes", type=float, default=8.0, help="training minutes")
    parser.add_argument("--tool-reward", type=float, default=0.1)
    parser.add_argument("--eval-tasks", type=int, default=32)
    parser.add_argument("--run", type=Path, default=Path("runs/sql-team"))
    parser.add_argument("--out", type=Path, default=None, help="also write the results as JSON")
    args = parser.parse_args()

    command = train_args(args)
    metrics = train(args.run, command)
    steps = [m for m in metrics if "reward" in m]
    evals = [m for m in metrics if "eval_success_rate" in m]
    curve = {"minutes": [m["train_seconds"] / 60 for m in steps]}
    for key in ("success_rate", *(f"reward/{agent}" for agent in TRAINED)):
        curve[key] = [m[key] for m in steps]
    # The writer acts once an episode and its return is the score plus the tool reward when its
    # query ran: what is left after the score is the share of writer queries that ran. That holds
    # while every episode is learned from (reward/<agent> averages the kept groups' calls only).
    lost = sum(m["failed_episodes"] + m["dropped_groups"] for m in steps)
    exact = args.tool_reward and not lost
    curve["writer_query_ran"] = [
        (m["reward/writer"] - m["score"]) / args.tool_reward if exact else None for m in steps
    ]
    episodes = sum(m["episodes"] for m in steps)
    row = {
        "steps": len(steps),
        "train_minutes": steps[-1]["train_seconds"] / 60,
        "seconds_per_step": steps[-1]["train_seconds"] / len(steps),
        "episodes": episodes,
        "failed_episodes_and_dropped_groups": lost,
        "writer_query_ran_all_steps": sum(curve["writer_query_ran"]) / len(steps)
        if exact
        else None,
        # the checker is not trained: every call past the writer's one is the rewriter's
        "rewriter_calls": sum(m["transitions"] for m in steps) - episodes if not lost else None,
        "train_successes": round(sum(m["success_rate"] * m["episodes"] for m in steps)),
        "test_success_before": evals[0]["eval_success_rate"],
        "test_success_after": evals[-1]["eval_success_rate"],
        **held_out(args.run, "test_unseen"),
        "command": "boltzoo train " + " ".join(command),
        **curve,
    }
    print(json.dumps({k: v for k, v in row.items() if k not in curve}))
    if args.out:
        write_record(args.out, [row])
        panels = {"success_rate": "team success (training, sampled)"}
        panels |= {f"reward/{agent}": f"reward paid to the {agent}" for agent in TRAINED}
        if exact:
            panels["writer_query_ran"] = "writer queries that execute"
        plot_panels({"sql team": curve}, panels, args.out.with_suffix(".png"))


if __name__ == "__main__":
    main()
