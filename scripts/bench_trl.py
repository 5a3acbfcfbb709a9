"""LightningRL against TRL's GRPOTrainer: the same single-turn math task, the same wall time.

Both sides train SmolLM2-135M-Instruct with LoRA (r=16, alpha=32, every linear layer of the
blocks) on math-v0's easy problems in one turn (``max_turns=1``), 8 problems x 4 samples a step,
up to 64 new tokens, temperature 1, learning rate 1e-4 (constant), no KL term, bf16 autocast,
and the same reward: the env's own, 1 for a correct answer (``lenient_answer``: the last number
counts when none is marked), as in the demo. TRL's reward function plays each completion in a
math-v0 env, so the two optimise exactly the same thing.

They run in turns, in this one process (``--rounds`` rounds of LightningRL then TRL), each for
``--minutes`` of training wall time (model loading and evaluation not counted). Reported per run:
answers (sampled completions) per second of training, the mean train reward and success of the
last steps, and held-out success (greedy, the first ``--eval-tasks`` test problems) after the
run, evaluated the same way for both (boltzoo's rollout over the trained LoRA model).

    python scripts/bench_trl.py --minutes 5 --rounds 2 --out benchmarks/results/bench_trl.json
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import torch

import boltzoo
from benchlib import write_record
from boltzoo.agents.models import load_model
from boltzoo.agents.transformers_policy import TransformersPolicy

ENV_KWARGS = {"level": "easy", "max_turns": 1, "lenient_answer": True, "few_shot": False}
SETTINGS = dict(prompts=8, samples=4, max_new_tokens=64, lr=1e-4, lora_r=16, lora_alpha=32)


def heldout_success(model, adapter: str, tokenizer, tasks: int) -> float:
    """Greedy success on the first ``tasks`` test problems, through boltzoo's rollout."""
    policy = TransformersPolicy(
        model,
        tokenizer,
        max_new_tokens=SETTINGS["max_new_tokens"],
        temperature=0.0,
        adapter=adapter,
    )
    model.eval()
    episodes = boltzoo.rollout(
        "math-v0",
        {"solver": policy},
        tasks=range(tasks),
        progress=False,
        **ENV_KWARGS | {"split": "test"},
    )
    return float(np.mean([bool(e.success) for e in episodes]))


def run_lightningrl(minutes: float, eval_tasks: int, seed: int) -> dict:
    from boltzoo.lightningrl import Trainer, TrainerConfig

    config = TrainerConfig(
        env="math-v0",
        env_kwargs=ENV_KWARGS,
        model="smollm2-135m",
        output_dir=tempfile.mkdtemp(prefix="bench-lightningrl-"),
        seed=seed,
        steps=100_000,
        max_train_minutes=minutes,
        tasks_per_step=SETTINGS["prompts"],
        group_size=SETTINGS["samples"],
        max_new_tokens=SETTINGS["max_new_tokens"],
        lr=SETTINGS["lr"],
        lora_r=SETTINGS["lora_r"],
        lora_alpha=SETTINGS["lora_alpha"],
        sampler="copy",
        sampler_precision="bf16",
        precision="bf16",
        save_every=0,
        progress=True,
    )
    trainer = Trainer(config)
    started = time.perf_counter()
    history = trainer.train()
    seconds = time.perf_counter() - started
    last = history[-5:]
    return {
        "side": "lightningrl",
        "steps": len(history),
        "train_seconds": seconds,
        "answers": len(history) * SETTINGS["prompts"] * SETTINGS["samples"],
        "answers_per_second": len(history) * SETTINGS["prompts"] * SETTINGS["samples"] / seconds,
        "last_steps_reward": float(np.mean([m["reward"] for m in last])),
        "last_steps_success": float(np.mean([m["success_rate"] for m in last])),
        "heldout_success": heldout_success(
            trainer.weights.model, "policy", trainer.tokenizer, eval_tasks
        ),
    }


def run_trl(minutes: float, eval_tasks: int, seed: int) -> dict:
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    env = boltzoo.make("math-v0", **ENV_KWARGS)
    rows = []
    for index in range(env.unwrapped.num_tasks):
        env.reset(options={"task_index": index})
        rows.append({"prompt": env.observe("solver")["messages"], "task_index": index})

    successes: list[bool] = []  # filled by the reward function, one per completion
    steps: list[dict] = []  # TRL's logged metrics, one per step

    def math_v0_reward(prompts, completions, task_index, **kwargs):
        """The env's own reward of each completion, played as the solver's one turn."""
        rewards = []
        for completion, index in zip(completions, task_index, strict=True):
            env.reset(options={"task_index": int(index)})
            env.step(completion[0]["content"])
            rewards.append(float(env.rewards["solver"]))
            successes.append(bool(env.infos["solver"].get("success")))
        return rewards

    class WallClock(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            self.started = time.perf_counter()

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "reward" in logs:
                steps.append(dict(logs))

        def on_step_end(self, args, state, control, **kwargs):
            if time.perf_counter() - self.started >= 60 * minutes:
                control.should_training_stop = True

    model, tokenizer = load_model("smollm2-135m", device="cpu")
    config = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="bench-trl-"),
        per_device_train_batch_size=SETTINGS["prompts"] * SETTINGS["samples"],
        num_generations=SETTINGS["samples"],
        max_completion_length=SETTINGS["max_new_tokens"],
        learning_rate=SETTINGS["lr"],
        lr_scheduler_type="constant",
        warmup_steps=0,
        beta=0.0,
        temperature=1.0,
        bf16=True,
        use_cpu=True,
        max_steps=100_000,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        seed=seed,
    )
    lora = LoraConfig(
        r=SETTINGS["lora_r"], lora_alpha=SETTINGS["lora_alpha"], target_modules="all-linear"
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=math_v0_reward,
        args=config,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        peft_config=lora,
        callbacks=[WallClock()],
    )
    started = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - started
    answers = trainer.state.global_step * SETTINGS["prompts"] * SETTINGS["samples"]
    per_step = SETTINGS["prompts"] * SETTINGS["samples"]
    return {
        "side": "trl",
        "steps": trainer.state.global_step,
        "train_seconds": seconds,
        "answers": answers,
        "answers_per_second": answers / seconds,
        "last_steps_reward": float(np.mean([s["reward"] for s in steps[-5:]])),
        "last_steps_success": float(np.mean(successes[-5 * per_step :])),
        "heldout_success": heldout_success(trainer.model, "default", tokenizer, eval_tasks),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=5.0, help="training wall time per run")
    parser.add_argument("--rounds", type=int, default=2, help="LightningRL-then-TRL rounds")
    parser.add_argument("--eval-tasks", type=int, default=128, help="held-out test problems")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)

    runs = []
    for round_ in range(args.rounds):
        for run in (run_lightningrl, run_trl):
            result = run(args.minutes, args.eval_tasks, args.seed + round_) | {"round": round_}
            runs.append(result)
            print(
                f"round {round_} {result['side']:>11}: {result['steps']} steps in "
                f"{result['train_seconds']:.0f} s, {result['answers_per_second']:.2f} answers/s, "
                f"last-steps reward {result['last_steps_reward']:.3f}, held-out success "
                f"{result['heldout_success']:.1%}",
                flush=True,
            )
    summary = {}
    for side in ("lightningrl", "trl"):
        mine = [r for r in runs if r["side"] == side]
        summary[side] = {
            key: float(np.mean([r[key] for r in mine]))
            for key in ("answers_per_second", "last_steps_reward", "heldout_success")
        }
    ratio = summary["lightningrl"]["answers_per_second"] / summary["trl"]["answers_per_second"]
    print(f"answers/s, LightningRL / TRL: {ratio:.2f}x")
    if args.out:
        write_record(
            Path(args.out),
            runs,
            settings=SETTINGS | {"env_kwargs": ENV_KWARGS, "minutes": args.minutes},
            summary=summary,
            answers_per_second_ratio=ratio,
        )


if __name__ == "__main__":
    main()
