"""Tool use without reward gaming: calculator use and success over training, three rewards.

    python scripts/bench_tool_use.py --minutes 6 --out benchmarks/results/tool_use.json

Each variant is one ``boltzoo train math-v0`` run (the command line is the one way to train;
this script loops over it and draws the comparison) on the same problems, seed and settings:

* ``plain``: the task reward only (1 for a right answer);
* ``bonus``: plus ``tool_reward`` for every calculator call that evaluates, paid as it is made
  (the naive bonus: a wrong expression that evaluates earns it too);
* ``gated``: the same bonus held back and paid only when the episode succeeds
  (``tool_reward_on_success``), so calls in failing episodes earn nothing.

It writes each run under ``--runs``, the per-step calculator-use rate and success of every
variant to ``--out`` (JSON) and both curves to a PNG next to it. No held-out evaluation:
training success is the measure (held-out success of this model on medium is near 0).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchlib import LORA_RUN_ARGS, plot_panels, train, write_record

VARIANTS = {
    "plain": {},
    "bonus": {"tool_reward": None},
    "gated": {"tool_reward": None, "tool_reward_on_success": True},
}


def train_args(variant: str, args: argparse.Namespace) -> list[str]:
    """Return the ``boltzoo train`` arguments of one variant."""
    env_kwargs = {"level": args.level, "max_turns": 2, "few_shot": True, "lenient_answer": True}
    for key, value in VARIANTS[variant].items():
        env_kwargs[key] = args.tool_reward if value is None else value
    return [
        "math-v0", "--model", args.model, "--env-kwargs", json.dumps(env_kwargs),
        "--train-agents", '["solver"]', "--max-train-minutes", str(args.minutes),
        "--max-new-tokens", "64", "--eval-every", "0", *LORA_RUN_ARGS,
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--level", default="medium")
    parser.add_argument("--minutes", type=float, default=6.0, help="training minutes per run")
    parser.add_argument("--tool-reward", type=float, default=0.2)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--runs", type=Path, default=Path("runs/tool-use"))
    parser.add_argument("--out", type=Path, default=None, help="also write the results as JSON")
    args = parser.parse_args()

    rows, curves = [], {}
    for variant in args.variants:
        command = train_args(variant, args)
        metrics = train(args.runs / variant, command)
        steps = [m for m in metrics if "tool_use_rate" in m]
        curves[variant] = {
            "minutes": [m["train_seconds"] / 60 for m in steps],
            "tool_use_rate": [m["tool_use_rate"] for m in steps],
            "success_rate": [m["success_rate"] for m in steps],
        }
        first, last = steps[: max(1, len(steps) // 4)], steps[-max(1, len(steps) // 4) :]
        rows.append(
            {
                "variant": variant,
                "steps": len(steps),
                "tool_use_first_quarter": sum(m["tool_use_rate"] for m in first) / len(first),
                "tool_use_last_quarter": sum(m["tool_use_rate"] for m in last) / len(last),
                "success_first_quarter": sum(m["success_rate"] for m in first) / len(first),
                "success_last_quarter": sum(m["success_rate"] for m in last) / len(last),
                "command": "boltzoo train " + " ".join(command),
                **curves[variant],
            }
        )
        print(json.dumps({k: v for k, v in rows[-1].items() if k not in curves[variant]}))
    if args.out:
        write_record(args.out, rows)
        panels = {"tool_use_rate": "episodes that called the calculator",
                  "success_rate": "training success"}  # fmt: skip
        plot_panels(curves, panels, args.out.with_suffix(".png"))


if __name__ == "__main__":
    main()
