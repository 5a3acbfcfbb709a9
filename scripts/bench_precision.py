"""The learner's pass in bf16 autocast against fp32 on this machine's CPU, and whether it has
native bf16.

``precision="bf16"`` autocasts the learner only where ``boltzoo.agents.models.native_bf16`` says
the device runs bf16 natively (a CPU with AVX-512 or AMX; a GPU with bf16); elsewhere, as on an
AVX2-only CPU, bf16 is emulated and the learner runs fp32. This script measures what that choice
is worth here: ``Learner.policy_gradient_backward`` (forward and backward, the real code, LoRA
r=16, packed calls) on the same math-v0 calls with bf16 autocast forced on and off, after one
untimed pass of each, in rounds of alternating order. (Sampling's side: ``bench_sampler.py``.)

    python scripts/bench_precision.py --episodes 8 --rounds 1
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

import boltzoo
from benchlib import alternating_rounds, learner_trainer, mixed_advantages, write_record
from boltzoo.agents.models import load_model, native_bf16
from boltzoo.agents.scripted import ScriptedPolicy
from boltzoo.lightningrl.transitions import flatten

ENV_KWARGS = {"level": "easy", "max_turns": 3, "few_shot": False}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=8, help="two-turn episodes a pass")
    parser.add_argument("--rounds", type=int, default=1, help="timed passes of each way")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/bench_precision.json"))
    args = parser.parse_args()
    torch.manual_seed(0)
    native = native_bf16("cpu")
    print(f"CPU capability {torch.backends.cpu.get_cpu_capability()}, native bf16: {native}")

    model, tokenizer = load_model("smollm2-135m", device="cpu", dtype=torch.float32)
    oracle = ScriptedPolicy(lambda turn: turn.env.oracle_action(turn.agent), tokenizer)
    episodes = boltzoo.rollout(
        "math-v0", {"solver": oracle}, tasks=range(args.episodes), progress=False, **ENV_KWARGS
    )
    transitions = mixed_advantages(flatten(episodes))
    trainer = learner_trainer(model, tokenizer, "math-v0", ENV_KWARGS)

    def accumulate(bf16: bool) -> None:
        trainer.learner.use_bf16 = bf16  # forced, whatever native_bf16 says
        trainer.learner.optimizer.zero_grad(set_to_none=True)
        assert trainer.learner.policy_gradient_backward("policy", transitions, {}, 1.0)

    seconds = alternating_rounds(accumulate, (False, True), args.rounds)
    fp32, bf16 = min(seconds[False]), min(seconds[True])
    print(
        f"{len(transitions)} calls: fp32 {fp32:.2f} s, bf16 autocast {bf16:.2f} s "
        f"(bf16 takes {bf16 / fp32:.2f}x fp32's time)"
    )
    write_record(
        args.out,
        [{"fp32_seconds": seconds[False], "bf16_seconds": seconds[True]}],
        cpu_capability=torch.backends.cpu.get_cpu_capability(),
        native_bf16=native,
        calls=len(transitions),
        bf16_over_fp32_time=round(bf16 / fp32, 2),
    )


if __name__ == "__main__":
    main()
