"""An AutoGen AssistantAgent trained by LightningRL through the gateway, its code unchanged.

    python scripts/bench_framework.py --minutes 8 --out benchmarks/results/framework.json

One ``boltzoo train math-v0 --framework autogen`` run: the solver is the bundled AutoGen
``AssistantAgent`` (``boltzoo.agents.examples.autogen_assistant``, with the env's calculator as
its tool), which calls SmolLM2 over HTTP through boltzoo's OpenAI-compatible gateway; the learner
trains a LoRA adapter on the calls the gateway recorded (exact token ids and logprobs) and the
gateway serves the new weights from the next step on. The agent is never edited.

The env pays the task reward (a right marked final answer: 1) and ``format_reward=1.0`` for a
marked final answer (``\\boxed{}``, a ``####`` line or an ``Answer:`` line), a signal SmolLM2-135M
can learn within minutes (it rarely marks its answer, and when it does the arithmetic is mostly
wrong: BENCHMARKS.md). Held-out figures (greedy, ``--eval-tasks`` test problems spread over the
split) before and after: success (a right marked answer) and the share of marked answers (the
trained agent's return less its task reward). Writes them to ``--out`` and the training curves
to a PNG next to it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchlib import LORA_RUN_ARGS, plot_panels, train, write_record


def train_args(args: argparse.Namespace) -> list[str]:
    """Return the ``boltzoo train`` arguments of the run."""
    env_kwargs = {"level": "easy", "max_turns": 1, "format_reward": 1.0, "few_shot": False}
    return [
        "math-v0", "--model", args.model, "--framework", args.framework,
        "--env-kwargs", json.dumps(env_kwargs), "--train-agents", '["solver"]',
        "--max-train-minutes", str(args.minutes), "--max-new-tokens", "64",
        "--eval-every", "1000", "--eval-tasks", str(args.eval_tasks), *LORA_RUN_ARGS,
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--framework", default="autogen", choices=["autogen", "openai-agents"])
    parser.add_argument("--minutes", type=float, default=8.0, help="training minutes")
    parser.add_argument("--eval-tasks", type=int, default=64)
    parser.add_argument("--run", type=Path, default=Path("runs/framework"))
    parser.add_argument("--out", type=Path, default=None, help="also write the results as JSON")
    args = parser.parse_args()

    command = train_args(args)
    metrics = train(args.run, command)
    steps = [m for m in metrics if "reward" in m]
    evals = [m for m in metrics if "eval_success_rate" in m]
    first, last = evals[0], evals[-1]
    curve = {
        "minutes": [m["train_seconds"] / 60 for m in steps],
        "reward": [m["reward"] for m in steps],
        "success_rate": [m["success_rate"] for m in steps],
    }
    row = {
        "framework": args.framework,
        "steps": len(steps),
        "seconds_per_step": steps[-1]["train_seconds"] / len(steps),
        "llm_calls_per_episode": sum(m["transitions"] for m in steps)
        / sum(m["episodes"] for m in steps),
        "held_out_success_before": first["eval_success_rate"],
        "held_out_success_after": last["eval_success_rate"],
        # the solver's return is its task reward (the score) plus 1 for a marked answer
        "held_out_marked_before": first["eval_return"] - first["eval_score"],
        "held_out_marked_after": last["eval_return"] - last["eval_score"],
        "command": "boltzoo train " + " ".join(command),
        **curve,
    }
    print(json.dumps({k: v for k, v in row.items() if k not in curve}))
    if args.out:
        write_record(args.out, [row])
        panels = {
            "reward": "solver's reward per LLM call (task + format)",
            "success_rate": "right answers (training, sampled)",
        }
        plot_panels({f"{args.framework} solver": curve}, panels, args.out.with_suffix(".png"))


if __name__ == "__main__":
    main()
