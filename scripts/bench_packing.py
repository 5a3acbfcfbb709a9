"""The learner on two-turn math-v0 episodes: each call its own sequence against calls packed.

A math-v0 solver episode with the calculator is two calls: ``<calc>...</calc>``, then (after the
tool's output) the answer, and the second call's prompt is the first call's prompt, response and
the tool output. ``TrainerConfig.pack_calls`` (the default) runs such calls as one sequence.
This script times ``Trainer._accumulate`` (forward and backward over one step's calls, the
real code) on SmolLM2-135M-Instruct with the demo's learner settings (LoRA r=16, bf16 autocast;
``--precision fp32`` for fp32), both ways on the same calls, after one untimed pass of each, in
rounds of alternating order: response tokens per second (best round) and the ratio. The calls
are real two-turn episodes: their token ids come from SmolLM2's chat template over the env's
own prompts, the responses are the oracle's (a calculator call, then the answer) or, with
``--model``, a model's greedy ones.

    python scripts/bench_packing.py --episodes 32 --rounds 4
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

import boltzoo
from benchlib import alternating_rounds, learner_trainer, mixed_advantages, write_record
from boltzoo.agents.models import load_model, load_policy
from boltzoo.agents.scripted import ScriptedPolicy
from boltzoo.lightningrl.sequences import pack_calls
from boltzoo.lightningrl.transitions import flatten

ENV_KWARGS = {"level": "easy", "max_turns": 3, "few_shot": False}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=32, help="two-turn episodes a step")
    parser.add_argument("--rounds", type=int, default=3, help="timed passes of each way")
    parser.add_argument("--model", default=None, help="a model folder whose greedy calls to use")
    parser.add_argument("--precision", default="bf16", help="the learner's: fp32 | bf16")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/bench_packing.json"))
    args = parser.parse_args()
    torch.manual_seed(0)

    model, tokenizer = load_model("smollm2-135m", device="cpu")
    if args.model:
        policy = load_policy(args.model, max_new_tokens=48, temperature=0.0)
    else:
        policy = ScriptedPolicy(lambda turn: turn.env.oracle_action(turn.agent), tokenizer)
    episodes = boltzoo.rollout(
        "math-v0", {"solver": policy}, tasks=range(args.episodes), progress=False, **ENV_KWARGS
    )
    transitions = mixed_advantages(flatten(episodes))
    rows = pack_calls(transitions)
    print(f"{len(transitions)} calls from {len(episodes)} episodes -> {len(rows)} packed sequences")

    trainer = learner_trainer(model, tokenizer, "math-v0", ENV_KWARGS, precision=args.precision)
    response_tokens = sum(len(t.response_token_ids) for t in transitions)
    prompt_tokens = sum(len(t.prompt_token_ids) for t in transitions)

    def accumulate(way: bool) -> None:
        trainer.config.pack_calls = way
        trainer.learner.optimizer.zero_grad(set_to_none=True)
        assert trainer.learner.policy_gradient_backward("policy", transitions, {}, 1.0)

    seconds = alternating_rounds(accumulate, (False, True), args.rounds)
    results = []
    for packed in (False, True):
        best = min(seconds[packed])
        results.append(
            {
                "pack_calls": packed,
                "sequences": len(rows) if packed else len(transitions),
                "seconds": seconds[packed],
                "best_seconds": round(best, 3),
                "response_tokens_per_second": round(response_tokens / best, 1),
            }
        )
        print(
            f"pack_calls={packed}: {results[-1]['sequences']} sequences, best of "
            f"{args.rounds} {best:.2f} s, {results[-1]['response_tokens_per_second']} "
            "response tokens/s"
        )
    ratio = results[0]["best_seconds"] / results[1]["best_seconds"]
    print(f"packed / separate speed: {ratio:.2f}x")
    write_record(
        args.out,
        results,
        calls=len(transitions),
        episodes=len(episodes),
        prompt_tokens=prompt_tokens,
        response_tokens=response_tokens,
        responses="model greedy" if args.model else "oracle",
        speedup=round(ratio, 3),
    )


if __name__ == "__main__":
    main()
