"""Separate LoRA adapters per agent against one shared adapter, on rag-v0's searcher and answerer.

    python scripts/bench_adapters.py --minutes 10 --out benchmarks/results/adapters.json

Both runs train the searcher and the answerer of rag-v0 from the same base (SmolLM2 by default)
with the same seed and settings; they differ only in ``--policy-map``:

* ``separate``: ``{"searcher": "searcher", "answerer": "answerer"}``, one adapter per agent;
* ``shared``: both agents on one adapter (``{"searcher": "policy", "answerer": "policy"}``).

The searcher is also paid ``--tool-reward`` for each supporting passage its searches bring in
(rag-v0's ``tool_reward``), so it has a signal to learn from even while the team's answer is
wrong. Per agent, the script records the reward each agent was paid per step (``reward/<agent>``
in the metrics) and the held-out success and F1 before and after, writes them to ``--out`` and
draws the per-agent curves to a PNG next to it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchlib import LORA_RUN_ARGS, plot_panels, train, write_record

AGENTS = ("searcher", "answerer")
POLICY_MAPS = {
    "separate": {agent: agent for agent in AGENTS},
    "shared": {agent: "policy" for agent in AGENTS},
}


def train_args(variant: str, args: argparse.Namespace) -> list[str]:
    """Return the ``boltzoo train`` arguments of one variant."""
    env_kwargs = {"max_searches": 2, "k": 3, "tool_reward": args.tool_reward}
    return [
        "rag-v0", "--model", args.model, "--env-kwargs", json.dumps(env_kwargs),
        "--train-agents", json.dumps(list(AGENTS)),
        "--policy-map", json.dumps(POLICY_MAPS[variant]),
        "--max-train-minutes", str(args.minutes), "--max-new-tokens", "48",
        "--eval-every", "1000", "--eval-tasks", str(args.eval_tasks), *LORA_RUN_ARGS,
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--minutes", type=float, default=10.0, help="training minutes per run")
    parser.add_argument("--tool-reward", type=float, default=0.5)
    parser.add_argument("--eval-tasks", type=int, default=64)
    parser.add_argument("--variants", nargs="+", default=list(POLICY_MAPS))
    parser.add_argument("--runs", type=Path, default=Path("runs/adapters"))
    parser.add_argument("--out", type=Path, default=None, help="also write the results as JSON")
    args = parser.parse_args()

    rows, curves = [], {}
    for variant in args.variants:
        command = train_args(variant, args)
        metrics = train(args.runs / variant, command)
        steps = [m for m in metrics if "reward" in m]
        evals = [m for m in metrics if "eval_success_rate" in m]
        curves[variant] = {"minutes": [m["train_seconds"] / 60 for m in steps]}
        for agent in AGENTS:
            curves[variant][f"reward/{agent}"] = [m[f"reward/{agent}"] for m in steps]
        curves[variant]["score"] = [m["score"] for m in steps]
        half = max(1, len(steps) // 2)
        rows.append(
            {
                "variant": variant,
                "policy_map": POLICY_MAPS[variant],
                "steps": len(steps),
                **{
                    f"{agent}_reward_{part}": sum(m[f"reward/{agent}"] for m in chunk) / len(chunk)
                    for agent in AGENTS
                    for part, chunk in (("first_half", steps[:half]), ("second_half", steps[half:]))
                    if chunk
                },
                "held_out_success_before": evals[0]["eval_success_rate"],
                "held_out_success_after": evals[-1]["eval_success_rate"],
                "held_out_f1_before": evals[0]["eval_score"],
                "held_out_f1_after": evals[-1]["eval_score"],
                "command": "boltzoo train " + " ".join(command),
                **curves[variant],
            }
        )
        print(json.dumps({k: v for k, v in rows[-1].items() if k not in curves[variant]}))
    if args.out:
        write_record(args.out, rows)
        panels = {f"reward/{agent}": f"reward paid to the {agent}" for agent in AGENTS}
        panels["score"] = "team answer F1 (training)"
        plot_panels(curves, panels, args.out.with_suffix(".png"))


if __name__ == "__main__":
    main()
