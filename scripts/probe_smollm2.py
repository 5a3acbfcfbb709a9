"""What the bundled SmolLM2-135M-Instruct can do before training: bare arithmetic and math-v0.

    python scripts/probe_smollm2.py --out benchmarks/results/probe_smollm2.json

Two probes, both on the model as ``boltzoo`` loads it (the pip package's Q4_1 GGUF, converted;
sampled in bf16):

* bare arithmetic, greedy: ``"A OP B = ?"`` for 40 random pairs per number range and operator;
  right when the reply's answer (marked, else its last number, as math-v0's
  ``lenient_answer`` reads it) is the value;
* math-v0 (``--level``), per template: 10 train problems x 4 samples at temperature 0.7 with the
  env's system prompt and 64 new tokens, as the demo samples them. ``success``: the last number
  of the reply is the answer (the demo's ``lenient_answer``); ``right expression``: somewhere
  the reply writes an arithmetic expression (``50 - 27``, ``48*23``) whose value is the answer,
  whatever result it then states: the share a calculator would turn into right answers.
"""

from __future__ import annotations

import argparse
import collections
import random
import re
from pathlib import Path

import torch

from benchlib import write_record
from boltzoo.agents.models import load_model
from boltzoo.agents.transformers_policy import TransformersPolicy
from boltzoo.envs.data.math_tasks import generate_tasks
from boltzoo.envs.math_v0 import SOLVER_SYSTEM_PROMPT
from boltzoo.envs.tools.calculator import evaluate
from boltzoo.rewards.math import extract_answer, numbers_match

# An arithmetic expression as models write it in prose: numbers joined by + - * / x.
EXPRESSION_RE = re.compile(r"\(?\d+(?:\.\d+)?\)?(?:\s*[-+*/x×]\s*\(?\d+(?:\.\d+)?\)?)+")
OPERATORS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


def is_right(reply: str, gold: str) -> bool:
    """Return whether the reply's answer (marked, else its last number) equals ``gold``."""
    answer = extract_answer(reply, fallback_last_number=True)
    return answer is not None and numbers_match(answer, gold)


def probe_arithmetic(policy: TransformersPolicy, n: int) -> list[dict]:
    """Return greedy accuracy on ``A OP B = ?`` per number range and operator."""
    rng = random.Random(0)
    rows = []
    for low, high in ((2, 9), (10, 99)):
        for op, apply in OPERATORS.items():
            pairs = [sorted((rng.randint(low, high), rng.randint(low, high))) for _ in range(n)]
            pairs = [(b, a) for a, b in pairs]  # larger first: no negatives
            replies = policy.generate(
                [[{"role": "user", "content": f"{a} {op} {b} = ?"}] for a, b in pairs]
            )
            right = sum(
                is_right(r.text, str(apply(a, b))) for (a, b), r in zip(pairs, replies, strict=True)
            )
            rows.append({"probe": "arithmetic", "numbers": f"{low}-{high}", "operator": op,
                         "right": right, "of": len(pairs)})  # fmt: skip
            print(f"{low}-{high} {op}: {right}/{len(pairs)} right (e.g. {replies[0].text[:50]!r})")
    return rows


def probe_math(policy: TransformersPolicy, level: str, per_template: int) -> list[dict]:
    """Return sampled success and right-expression rates per math-v0 template."""
    by_template = collections.defaultdict(list)
    for task in generate_tasks(level, "train", seed=0):
        if len(by_template[task.template]) < per_template:
            by_template[task.template].append(task)
    tasks = [task for group in by_template.values() for task in group for _ in range(4)]
    chats = [
        [
            {"role": "system", "content": SOLVER_SYSTEM_PROMPT},
            {"role": "user", "content": t.question},
        ]
        for t in tasks
    ]
    success, expression = collections.Counter(), collections.Counter()
    for task, reply in zip(tasks, policy.generate(chats), strict=True):
        success[task.template] += is_right(reply.text, task.answer)
        values = [
            evaluate(m.group(0).replace("x", "*").replace("×", "*"))
            for m in EXPRESSION_RE.finditer(reply.text.replace(",", ""))
        ]
        expression[task.template] += any(
            v.ok and numbers_match(v.output, task.answer) for v in values
        )
    rows = []
    for template in by_template:
        n = 4 * len(by_template[template])
        right, written = success[template], expression[template]
        rows.append({"probe": f"math-v0 {level}", "template": template, "samples": n,
                     "success": right, "right_expression": written})  # fmt: skip
        print(f"{template:22s} success {right:2d}/{n}, right expression {written:2d}/{n}")
    n = len(tasks)
    print(
        f"all: success {sum(success.values())}/{n}, right expression {sum(expression.values())}/{n}"
    )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--level", default="easy")
    parser.add_argument("--pairs", type=int, default=40, help="arithmetic pairs per cell")
    parser.add_argument("--per-template", type=int, default=10, help="problems per template")
    parser.add_argument("--out", type=Path, default=None, help="also write the results as JSON")
    args = parser.parse_args()

    model, tokenizer = load_model(args.model)
    model = model.to(torch.bfloat16)
    greedy = TransformersPolicy(model, tokenizer, max_new_tokens=24, temperature=0.0, seed=0)
    sampled = TransformersPolicy(model, tokenizer, max_new_tokens=64, temperature=0.7, seed=0)
    rows = probe_arithmetic(greedy, args.pairs) + probe_math(sampled, args.level, args.per_template)
    if args.out:
        write_record(args.out, rows, model=args.model)


if __name__ == "__main__":
    main()
