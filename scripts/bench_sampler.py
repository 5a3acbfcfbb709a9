"""Sampling speed of the copy sampler in bf16 against fp32, on the same chats.

    python scripts/bench_sampler.py [--model smollm2-135m] [--chats 32] [--max-new-tokens 48]
        [--repeats 3] [--out FILE]
    python scripts/bench_sampler.py --shared-prefill [--tasks 8] [--group-size 4]
        [--eval-tasks 100] [--max-new-tokens 96] [--repeats 2] [--out FILE]

Two TransformersPolicy copies of one model, fp32 and bf16 (what ``sampler="copy"`` builds with
``sampler_precision``), sample the same math-v0 solver chats as one batch (temperature 1, a
fixed seed), alternating, ``--repeats`` times each. Reported: new tokens per second of each and
their ratio, and how many of the greedy answers agree.

With ``--shared-prefill``: the bf16 copy samples two sql-v0 writer batches (prompts of
400-1,000 tokens): one RL step's (``--tasks`` train tasks x ``--group-size`` copies each,
temperature 0.7) and one evaluation's (``--eval-tasks`` test tasks spread over the split,
greedy), each with the prefill of shared prompt starts done once (``shared_heads``) and,
alternating, with every prompt prefilled whole (``share_prefill=False``, the baseline), one
untimed call of each first. Reported: seconds of each, their ratio, and how many answers agree.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

import boltzoo
from benchlib import alternating_rounds, write_record
from boltzoo.agents.models import load_model
from boltzoo.agents.transformers_policy import TransformersPolicy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--chats", type=int, default=32)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--shared-prefill", action="store_true")
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--eval-tasks", type=int, default=100)
    args = parser.parse_args()
    if args.shared_prefill:
        bench_shared_prefill(args)
        return

    model, tokenizer = load_model(args.model, device="cpu")
    env = boltzoo.make("math-v0", split="test", max_turns=1)
    chats = []
    for task in range(args.chats):
        env.reset(options={"task_index": task})
        chats.append(env.observe("solver")["messages"])
    policies = {
        name: TransformersPolicy(
            model.to(dtype).eval() if name == "fp32" else _copy(model, dtype),
            tokenizer,
            name=name,
            seed=0,
            max_new_tokens=args.max_new_tokens,
        )
        for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16))
    }
    for policy in policies.values():
        policy.generate(chats[:2])  # warm-up
    speed: dict[str, list[float]] = {name: [] for name in policies}
    for _ in range(args.repeats):
        for name, policy in policies.items():
            started = time.perf_counter()
            completions = policy.generate(chats)
            elapsed = time.perf_counter() - started
            speed[name].append(sum(len(c.response_token_ids) for c in completions) / elapsed)
    greedy = {}
    for name, policy in policies.items():
        policy.sampling = policy.sampling.__class__(args.max_new_tokens, 0.0)
        greedy[name] = [c.text for c in policy.generate(chats)]
    agree = sum(a == b for a, b in zip(greedy["fp32"], greedy["bf16"], strict=True))
    row = {
        "fp32_tokens_per_second": statistics.median(speed["fp32"]),
        "bf16_tokens_per_second": statistics.median(speed["bf16"]),
        "ratio_bf16_over_fp32": statistics.median(speed["bf16"]) / statistics.median(speed["fp32"]),
        "greedy_answers_equal": agree,
        "chats": len(chats),
        "threads": torch.get_num_threads(),
    }
    print(
        f"fp32 {row['fp32_tokens_per_second']:.0f} tokens/s, bf16 "
        f"{row['bf16_tokens_per_second']:.0f} tokens/s (ratio {row['ratio_bf16_over_fp32']:.2f}); "
        f"greedy answers equal: {agree}/{len(chats)}"
    )
    if args.out:
        write_record(args.out, [row], model=args.model, max_new_tokens=args.max_new_tokens)


def bench_shared_prefill(args: argparse.Namespace) -> None:
    """Time an RL step's batch and an evaluation's on sql-v0 with shared prefill and without."""
    model, tokenizer = load_model(args.model, device="cpu")
    model = _copy(model, torch.bfloat16)
    batches = {}
    env = boltzoo.make("sql-v0", split="train", agents=["writer"], schema_rows=0)
    chats = []
    for task in range(args.tasks):  # tasks spread over the split: all three databases
        env.reset(options={"task_index": task * len(env.unwrapped.tasks) // args.tasks})
        chats += [env.observe("writer")["messages"]] * args.group_size
    batches[f"rl step: {args.tasks} train tasks x {args.group_size}, T 0.7"] = (chats, 0.7)
    env = boltzoo.make("sql-v0", split="test", agents=["writer"], schema_rows=0)
    chats = []
    for task in range(args.eval_tasks):
        env.reset(options={"task_index": task * len(env.unwrapped.tasks) // args.eval_tasks})
        chats.append(env.observe("writer")["messages"])
    batches[f"evaluation: {args.eval_tasks} test tasks, greedy"] = (chats, 0.0)
    rows = []
    for name, (chats, temperature) in batches.items():
        policies = {
            share: TransformersPolicy(
                model,
                tokenizer,
                seed=0,
                temperature=temperature,
                max_new_tokens=args.max_new_tokens,
                share_prefill=share,
            )
            for share in (False, True)
        }
        answers: dict[bool, list[list[int]]] = {}

        def sample(share: bool, policies=policies, answers=answers, chats=chats) -> None:
            answers[share] = [c.response_token_ids for c in policies[share].generate(chats)]

        seconds = alternating_rounds(sample, (False, True), args.repeats)
        equal = sum(a == b for a, b in zip(answers[False], answers[True], strict=True))
        prompt_tokens = [len(policies[True].encode_chat(chat)) for chat in chats]
        row = {
            "batch": name,
            "prompts": len(chats),
            "prompt_tokens": sum(prompt_tokens),
            "per_row_seconds": seconds[False],
            "shared_seconds": seconds[True],
            "ratio_per_row_over_shared": statistics.median(seconds[False])
            / statistics.median(seconds[True]),
            "answers_equal": equal,
        }
        rows.append(row)
        print(
            f"{name} ({len(chats)} prompts of {min(prompt_tokens)}-{max(prompt_tokens)} tokens): "
            f"every prompt whole {statistics.median(seconds[False]):.1f} s, shared starts "
            f"{statistics.median(seconds[True]):.1f} s ({row['ratio_per_row_over_shared']:.2f}x); "
            f"answers equal: {row['answers_equal']}/{len(chats)}"
        )
    if args.out:
        write_record(args.out, rows, model=args.model, max_new_tokens=args.max_new_tokens)


def _copy(model: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    from transformers import AutoModelForCausalLM

    copy = AutoModelForCausalLM.from_config(model.config, dtype=dtype)
    copy.load_state_dict(model.state_dict())
    return copy.eval()


if __name__ == "__main__":
    main()
