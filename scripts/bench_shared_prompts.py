"""The learner on one GRPO step of sql-v0: a pass over each row's prompt against one per group.

A GRPO step samples every task ``--group-size`` times, and on sql-v0 the writer's prompt (the
schema) is 400-1,000 tokens against answers of at most 96, so the learner spends most of its
time re-reading prompts. ``TrainerConfig.share_prompts`` (the default) runs a group's prompt once
and its rows from there on. This script times ``Trainer._accumulate`` (forward and backward over
a step's calls, the real code, the CPU's micro-batch default) on SmolLM2-135M-Instruct with RL's
learner settings (LoRA r=16, bf16 autocast), both ways on the same calls, after one untimed pass
of each, in rounds of alternating order: seconds (best round) and the ratio. The calls:
``--tasks`` train tasks spread over the split (all three databases), ``--group-size`` rows
each, the prompts SmolLM2's chat template over the env's own, each response the oracle's query
followed by seeded random tokens up to a length drawn from 40-96 (what sampled answers are).
With ``--demonstrations`` it times instead ``Trainer.backward_cross_entropy`` on the oracle's
calls themselves, one per task (what ``replay_demos`` adds to every update): no groups, but the
calls on one database share its schema.

    python scripts/bench_shared_prompts.py --tasks 8 --group-size 8 --rounds 3
    python scripts/bench_shared_prompts.py --tasks 8 --demonstrations --rounds 3 \
        --out benchmarks/results/bench_shared_prompts_replay.json
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import numpy as np
import torch

import boltzoo
from benchlib import alternating_rounds, learner_trainer, write_record
from boltzoo.agents.models import load_model
from boltzoo.agents.scripted import ScriptedPolicy
from boltzoo.lightningrl.transitions import flatten

ENV_KWARGS = {"agents": ["writer"], "schema_rows": 0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3, help="timed passes of each way")
    parser.add_argument(
        "--demonstrations", action="store_true", help="time the replayed demonstrations' loss"
    )
    parser.add_argument(
        "--out", type=Path, default=Path("benchmarks/results/bench_shared_prompts.json")
    )
    args = parser.parse_args()
    torch.manual_seed(0)
    rng = np.random.default_rng(0)

    model, tokenizer = load_model("smollm2-135m", device="cpu")
    oracle = ScriptedPolicy(lambda turn: turn.env.oracle_action(turn.agent), tokenizer)
    num_tasks = boltzoo.make("sql-v0", split="train", **ENV_KWARGS).unwrapped.num_tasks
    tasks = [k * num_tasks // args.tasks for k in range(args.tasks)]
    episodes = boltzoo.rollout(
        "sql-v0", {"writer": oracle}, tasks=tasks, progress=False, split="train", **ENV_KWARGS
    )
    transitions = []
    demonstrations = flatten(episodes)
    if args.demonstrations:
        args.group_size = 1  # each call once, as replayed
    for k, call in enumerate(demonstrations):
        for j in range(args.group_size):  # a group: one prompt, answers of varied lengths
            length = max(len(call.response_token_ids), int(rng.integers(40, 97)))
            extra = rng.integers(100, 40000, size=length - len(call.response_token_ids))
            transitions.append(
                dataclasses.replace(
                    call,
                    episode_id=f"{call.episode_id}-{j}",
                    group=k,
                    response_token_ids=call.response_token_ids + extra.tolist(),
                    logprobs=None,
                    advantage=float(rng.choice([-1.0, 1.0]) * rng.uniform(0.5, 1.5)),
                )
            )
    prompt_tokens = [len(t.prompt_token_ids) for t in transitions[:: args.group_size]]
    timed = demonstrations if args.demonstrations else transitions
    response_tokens = sum(len(t.response_token_ids) for t in timed)
    print(f"{len(timed)} calls, prompts of {min(prompt_tokens)}-{max(prompt_tokens)} tokens")

    trainer = learner_trainer(model, tokenizer, "sql-v0", ENV_KWARGS)

    def accumulate(way: bool) -> None:
        trainer.config.share_prompts = way
        trainer.learner.optimizer.zero_grad(set_to_none=True)
        if args.demonstrations:
            assert np.isfinite(trainer.learner.cross_entropy_backward("policy", demonstrations))
        else:
            assert trainer.learner.policy_gradient_backward("policy", transitions, {}, 1.0)

    seconds = alternating_rounds(accumulate, (False, True), args.rounds)
    results = []
    for share in (False, True):
        best = min(seconds[share])
        results.append(
            {
                "share_prompts": share,
                "seconds": seconds[share],
                "best_seconds": round(best, 3),
                "response_tokens_per_second": round(response_tokens / best, 1),
            }
        )
        print(f"share_prompts={share}: best of {args.rounds} {best:.2f} s")
    ratio = results[0]["best_seconds"] / results[1]["best_seconds"]
    print(f"shared / a pass each, speed: {ratio:.2f}x")
    write_record(
        args.out,
        results,
        calls=len(timed),
        demonstrations=args.demonstrations,
        tasks=args.tasks,
        group_size=args.group_size,
        prompt_tokens=prompt_tokens,
        response_tokens=response_tokens,
        speedup=round(ratio, 3),
    )


if __name__ == "__main__":
    main()
