"""A framework agent trained by LightningRL through the gateway, its code unchanged.

    python scripts/bench_framework.py --minutes 8 --out benchmarks/results/framework.json
    python scripts/bench_framework.py --framework langgraph-sql-graph --init-from runs/sql/sft \
        --minutes 10 --eval-tasks 100 --out benchmarks/results/framework_sql_graph.json

One ``boltzoo train`` run with ``--framework``: each framework's default run below, or any env
with ``--env``/``--env-kwargs``/``--train-agents``, from a warm start with ``--init-from``
(``scripts/bench_warm_start.py --framework`` makes one and runs the whole recipe).

``autogen`` / ``openai-agents`` (math-v0): the solver is the bundled AutoGen ``AssistantAgent``
(``boltzoo.agents.examples.autogen_assistant``, with the env's calculator as its tool) or Agents
SDK ``Agent``, which calls SmolLM2 over HTTP through boltzoo's OpenAI-compatible gateway; the
learner trains a LoRA adapter on the calls the gateway recorded (exact token ids and logprobs)
and the gateway serves the new weights from the next step on. The agent is never edited. The env
pays the task reward (a right marked final answer: 1) and ``format_reward=1.0`` for a marked
final answer (``\\boxed{}``, a ``####`` line or an ``Answer:`` line), a signal SmolLM2-135M can
learn within minutes. Held-out: success and the share of marked answers (the trained agent's
return less its task reward).

``langgraph-sql-graph`` (sql-v0, ``agents=["writer"]``, schema without example rows): the
paper's SQL agent, one LangGraph graph (write_query -> execute -> check_query -> rewrite_query,
at most two rounds -> answer). Its writer and rewriter nodes train (one shared LoRA adapter,
from ``--init-from``'s warm start when given); its checker node calls the frozen model.
Held-out: execution accuracy on ``test``; in training, the trained nodes' calls per episode
(1 + the rewrites after the checker's rejections).

Figures are greedy, on ``--eval-tasks`` test tasks spread over the split, before and after.
Writes them to ``--out`` and the training curves to a PNG next to it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchlib import LORA_RUN_ARGS, plot_panels, train, write_record

# framework -> its default run: env, env kwargs, who learns, new tokens a call
MATH_EASY = {"level": "easy", "max_turns": 1, "format_reward": 1.0, "few_shot": False}
DEFAULT_RUNS = {
    "autogen": ("math-v0", MATH_EASY, '["solver"]', 64),
    "openai-agents": ("math-v0", MATH_EASY, '["solver"]', 64),
    "langgraph": ("math-v0", MATH_EASY, '["solver"]', 64),
    "langgraph-sql-graph": (
        "sql-v0",
        {"agents": ["writer"], "schema_rows": 0},
        "writer|rewriter",
        96,
    ),
}


def train_args(args: argparse.Namespace) -> list[str]:
    """Return the ``boltzoo train`` arguments of the run: the framework's default run, or
    ``--env`` (all its agents learning unless ``--train-agents`` says), ``--env-kwargs`` and
    ``--init-from`` where given."""
    env, env_kwargs, agents, tokens = DEFAULT_RUNS[args.framework]
    if args.env is not None:
        env, env_kwargs, agents = args.env, {}, None
    env_kwargs = json.loads(args.env_kwargs) if args.env_kwargs else env_kwargs
    agents = args.train_agents or agents
    return [
        env, "--model", args.model, "--framework", args.framework,
        *(["--init-from", str(args.init_from)] if args.init_from else []),
        "--env-kwargs", json.dumps(env_kwargs), *(["--train-agents", agents] if agents else []),
        "--max-train-minutes", str(args.minutes), "--max-new-tokens", str(tokens),
        "--eval-every", "1000", "--eval-tasks", str(args.eval_tasks), *LORA_RUN_ARGS,
        "--lr", str(args.lr),
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--framework", default="autogen", choices=sorted(DEFAULT_RUNS))
    parser.add_argument("--init-from", type=Path, default=None, help="a warm start's run folder")
    parser.add_argument("--env", default=None, help="another env than the framework's default")
    parser.add_argument("--env-kwargs", default=None, help="JSON: the env's arguments")
    parser.add_argument("--train-agents", default=None, help="JSON list or regex (default: all)")
    parser.add_argument("--lr", type=float, default=5e-4)
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
        "command": "boltzoo train " + " ".join(command),
        **curve,
    }
    if command[0] == "math-v0" and json.loads(command[command.index("--env-kwargs") + 1]).get(
        "format_reward"
    ):
        # the solver's return is its task reward (the score) plus 1 for a marked answer
        row["held_out_marked_before"] = first["eval_return"] - first["eval_score"]
        row["held_out_marked_after"] = last["eval_return"] - last["eval_score"]
    print(json.dumps({k: v for k, v in row.items() if k not in curve}))
    if args.out:
        write_record(args.out, [row])
        panels = {
            "reward": "reward per trained LLM call",
            "success_rate": "right answers (training, sampled)",
        }
        plot_panels({args.framework: curve}, panels, args.out.with_suffix(".png"))


if __name__ == "__main__":
    main()
