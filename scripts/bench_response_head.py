"""The learner's output layer at the response positions only, against at every window position.

A packed row (``pack_calls``: an agent's calls that continue each other) has a window that runs
from its first response to its end, tool outputs included: for the Agents SDK's search agent on
rag-v0, the searches' hits between short JSON calls. ``response_logprobs`` once computed the
vocabulary-wide output layer and its log-softmax at every window position; it now computes them
only at the columns where some row of the micro-batch has a response token
(``sequences.scored_columns``). This script times ``Learner.policy_gradient_backward`` (forward
and backward over one step's calls, the real code, RL's settings: LoRA r=16, bf16 autocast
(fp32 on a CPU without native bf16), packed calls, shared prompts, the CPU's micro-batch
default) both ways, on the same calls, after one untimed pass of each, in rounds of alternating
order; the old way is the same code with ``scored_columns`` returning every column. Each
workflow's calls are recorded episodes (Episode JSONL): ``--tasks`` of them, each copied
``--group-size`` times as one GRPO group with advantages of both signs (a group whose reward
varies). Printed per workflow: rows, micro-batches, the tokens the model's body runs, the
positions the output layer runs each way, seconds each way and the ratio.

    boltzoo rollout rag-v0 --policy openai-agents --oracle --split train --episodes 8 \
        -e 'agents=["answerer"]' -e hops=2 -e k=3 -e question_search=false \
        --out runs/rag-sdk-oracle.jsonl
    boltzoo rollout rag-v0 --policy oracle --split train --episodes 8 -e hops=2 -e k=3 \
        -e max_searches=2 --out runs/rag-team-oracle.jsonl
    python scripts/bench_response_head.py \
        --workflow sdk=runs/rag-sdk-oracle.jsonl --workflow team=runs/rag-team-oracle.jsonl \
        --tasks 2 --group-size 8 --rounds 2
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import numpy as np
import torch

from benchlib import alternating_rounds, learner_trainer, write_record
from boltzoo.agents.models import load_model
from boltzoo.episode import load_episodes
from boltzoo.lightningrl import sequences
from boltzoo.lightningrl.trainer import Trainer
from boltzoo.lightningrl.transitions import demonstration_transitions

RESPONSE_COLUMNS = sequences.scored_columns
counted = {"body": 0, "head": 0}  # tokens into the model, positions into its output layer


def every_column(mask: torch.Tensor) -> torch.Tensor:
    """The learner before: logits at every window position."""
    return torch.arange(mask.shape[1])


def step_calls(path: Path, tasks: int, group_size: int, tokenizer, rng) -> list:
    """Return one RL step's calls: the first ``tasks`` successful episodes of ``path``, each
    copied ``group_size`` times (one group), every call with a non-zero advantage."""
    episodes = [e for e in load_episodes(path) if e.success][:tasks]
    calls = demonstration_transitions(episodes, None, tokenizer)
    step = []
    for j in range(group_size):
        sign = 1.0 if j % 2 else -1.0  # half the group right, half wrong
        for call in calls:
            step.append(
                dataclasses.replace(
                    call,
                    episode_id=f"{call.episode_id}-{j}",
                    group=call.task_index,
                    logprobs=None,
                    advantage=sign * float(rng.uniform(0.5, 1.5)),
                )
            )
    return step


def accumulate(trainer: Trainer, way, calls: list, tokens: dict) -> None:
    """One learner pass over ``calls`` with ``way`` choosing the scored columns; its token
    counts go to ``tokens[way]``."""
    sequences.scored_columns = way
    counted.update(body=0, head=0)
    trainer.learner.optimizer.zero_grad(set_to_none=True)
    assert trainer.learner.policy_gradient_backward("policy", calls, {}, 1.0)
    tokens[way] = dict(counted)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--workflow", action="append", required=True, metavar="NAME=EPISODES.jsonl",
        help="a workflow's recorded episodes (repeat for each workflow)",
    )  # fmt: skip
    parser.add_argument("--tasks", type=int, default=2, help="groups a step")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2, help="timed passes of each way")
    parser.add_argument(
        "--out", type=Path, default=Path("benchmarks/results/bench_response_head.json")
    )
    args = parser.parse_args()
    torch.manual_seed(0)
    rng = np.random.default_rng(0)

    model, tokenizer = load_model("smollm2-135m", device="cpu")
    # (math-v0 builds the trainer only: the learner runs on the recorded calls)
    trainer = learner_trainer(model, tokenizer, "math-v0", {})
    policy = trainer.weights.modules["policy"]

    def count_body(module, args, kwargs):
        counted["body"] += kwargs["input_ids"].numel()

    def count_head(module, args):
        counted["head"] += args[0].shape[0] * args[0].shape[1]

    policy.register_forward_pre_hook(count_body, with_kwargs=True)
    policy.get_output_embeddings().register_forward_pre_hook(count_head)

    results = []
    for spec in args.workflow:
        name, path = spec.split("=", 1)
        calls = step_calls(Path(path), args.tasks, args.group_size, tokenizer, rng)
        rows = sequences.pack_calls(calls)
        batches = sequences.micro_batches(
            rows, trainer.learner.micro_batch_tokens, share_prompts=True
        )
        tokens = {}
        ways = (every_column, RESPONSE_COLUMNS)
        seconds = alternating_rounds(
            lambda way, calls=calls, tokens=tokens: accumulate(trainer, way, calls, tokens),
            ways,
            args.rounds,
        )
        sequences.scored_columns = RESPONSE_COLUMNS
        best = {way: min(seconds[way]) for way in ways}
        row = {
            "workflow": name,
            "episodes": path,
            "calls": len(calls),
            "rows": len(rows),
            "micro_batches": len(batches),
            "response_tokens": sum(len(c.response_token_ids) for c in calls),
            "window_tokens": sum(r.window for r in rows),
            "body_tokens": tokens[RESPONSE_COLUMNS]["body"],
            "head_positions_every_column": tokens[every_column]["head"],
            "head_positions_response_columns": tokens[RESPONSE_COLUMNS]["head"],
            "seconds_every_column": seconds[every_column],
            "seconds_response_columns": seconds[RESPONSE_COLUMNS],
            "best_every_column": round(best[every_column], 3),
            "best_response_columns": round(best[RESPONSE_COLUMNS], 3),
            "speedup": round(best[every_column] / best[RESPONSE_COLUMNS], 3),
        }
        results.append(row)
        print(
            f"{name}: {row['calls']} calls in {row['rows']} rows, {row['micro_batches']} "
            f"micro-batches, {row['response_tokens']} response tokens in windows of "
            f"{row['window_tokens']}; body {row['body_tokens']} tokens; head "
            f"{row['head_positions_every_column']} -> {row['head_positions_response_columns']} "
            f"positions; best of {args.rounds}: {row['best_every_column']:.2f} s -> "
            f"{row['best_response_columns']:.2f} s ({row['speedup']:.2f}x)"
        )
    write_record(
        args.out,
        results,
        tasks=args.tasks,
        group_size=args.group_size,
        learner_bf16=trainer.learner.use_bf16,
    )


if __name__ == "__main__":
    main()
