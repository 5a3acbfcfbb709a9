"""The warm start: supervised fine-tuning (SFT) on recorded episodes, before RL.

RL reinforces what the model already does now and then; a small model that never solves a task
gives every group the same reward and the policy gradient nothing to work with. The field's
answer is a warm start: fine-tune on demonstrations (an oracle's, a teacher model's, a person's,
or the model's own successful episodes), then continue with RL from those weights.

One run, top to bottom (``SFTTrainer.train``):

1. read the demonstrations (``Episode`` JSONL, as ``boltzoo rollout`` writes them); keep the
   successful ones only with ``only_successful``;
2. ``flatten``: one sequence per LLM call of the trained agents, exactly as RL sees it. Token ids
   recorded in the episode are used as they are; text-only actions are tokenised here with the
   trained model's chat template (prompt: the observation's messages; response: the text and
   the end-of-turn token);
3. for each epoch, in a seeded order, batches of ``batch_size`` calls of one policy:
   the loss is the cross-entropy of the response tokens only (prompt tokens, tool outputs and
   other agents' turns are never targets), ``L = -sum_t m_t log p(y_t | y_<t) / sum_t m_t``
   over the batch's real response tokens; gradients clipped, one AdamW step;
4. held-out evaluation before and after (greedy, as the RL trainer evaluates), a checkpoint
   every ``save_every`` steps and after every epoch. A killed run resumes from its last
   (``resume()``, ``boltzoo sft --resume``): the batches of an epoch are seeded by the epoch,
   the RNG and optimiser states are the checkpoint's, so it ends with the weights an
   uninterrupted run ends with.

The weights, samplers, evaluation and checkpoints are an RL :class:`Trainer`'s (``self.run``,
which this class drives with its own loop and never steps): the same per-agent LoRA adapters or
full copies, the same checkpoints, so ``boltzoo export`` and ``TrainerConfig.init_from`` read an
SFT run as they read an RL run.
"""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from boltzoo.episode import Episode
from boltzoo.errors import DatasetError
from boltzoo.lightningrl.checkpoint import check_run_folder
from boltzoo.lightningrl.config import SFTConfig
from boltzoo.lightningrl.memory import release_freed_memory
from boltzoo.lightningrl.trainer import Trainer
from boltzoo.lightningrl.transitions import Transition, by_policy, read_demonstrations


class SFTTrainer:
    """Fine-tunes the selected agents' policies on demonstrations; see the module docstring.

    ``model`` / ``tokenizer`` may be given (tests pass a tiny model); else ``config.model`` loads.

    Attributes:
        config: the SFT config.
        run: the :class:`Trainer` that holds the weights (``run.weights``), the optimiser
            (``run.learner``), the samplers, the evaluation and the checkpoints.
        transitions: the demonstrations' LLM calls of the trained agents.
    """

    def __init__(self, config: SFTConfig, *, model: Any = None, tokenizer: Any = None):
        if not config.demos:
            raise DatasetError("SFT needs demonstrations: demos=[an Episode JSONL file]")
        self.config = config
        self.run = Trainer(config.trainer_config(), model=model, tokenizer=tokenizer)
        try:
            self._read_demonstrations(config)
        except BaseException:
            self.close()  # (Ray workers and gateways the trainer started)
            raise

    def close(self) -> None:
        """Stop what the run started (gateways, agent programs, Ray workers)."""
        self.run.close()

    def __enter__(self) -> SFTTrainer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def resume(self) -> bool:
        """Continue from the newest checkpoint in ``output_dir`` (``Trainer.resume``)."""
        return self.run.resume()

    def _read_demonstrations(self, config: SFTConfig) -> None:
        run = self.run
        self.transitions, episodes = read_demonstrations(
            config.demos,
            run.train_agents,
            run.tokenizer,
            agents=run.agents,
            only_successful=config.only_successful,
        )
        self.demo_episodes = len({t.episode_id for t in self.transitions})
        self._warn_on_other_prompts(episodes)
        self.by_policy = by_policy(self.transitions, run.policy_of)
        self.batches_per_epoch = sum(
            -(-len(ts) // config.batch_size) for ts in self.by_policy.values()
        )
        run.config.steps = config.epochs * self.batches_per_epoch  # the lr schedule's length

    def _warn_on_other_prompts(self, episodes: list[Episode]) -> None:
        """Say so when demonstrations were played with other prompts than the env's now: the
        model would learn answers to prompts that training and evaluation never show it."""
        cfg, env_id = self.config, self.run.env_id
        from boltzoo.registration import inspected

        with inspected(env_id, **cfg.env_kwargs) as env:
            prompts = env.prompts
        other = sum(
            1
            for e in episodes
            if any(prompts.get(a) != p for a, p in e.metadata.get("prompts", {}).items())
        )
        if other:
            print(
                f"warning: {other} of {len(episodes)} demonstrations were played with other "
                f"system prompts than {env_id} with env_kwargs={cfg.env_kwargs} uses",
                flush=True,
            )

    def _evaluated_last(self) -> bool:
        """Return whether ``metrics.jsonl`` holds an evaluation of the current step."""
        from boltzoo.lightningrl.report import read_metrics

        run = self.run
        rows = read_metrics(run.output_dir) if run.logs.metrics_path.exists() else []
        return any(r["step"] == run.step and "eval_success_rate" in r for r in rows)

    def batches(self, epoch: int) -> list[tuple[str, list[Transition]]]:
        """Return epoch ``epoch``'s batches: each policy's calls shuffled (seeded by epoch) and
        cut into ``batch_size`` pieces, the policies' batches interleaved in a seeded order."""
        rng = np.random.default_rng([self.config.seed, epoch])
        size = self.config.batch_size
        batches = []
        for name in sorted(self.by_policy):
            calls = self.by_policy[name]
            order = rng.permutation(len(calls))
            batches += [
                (name, [calls[i] for i in order[start : start + size]])
                for start in range(0, len(calls), size)
            ]
        return [batches[i] for i in rng.permutation(len(batches))]

    def sft_step(self, name: str, batch: list[Transition]) -> dict[str, float]:
        """Take one optimizer step of policy ``name`` on ``batch``; return its loss and counts."""
        metrics = self.run.learner.sft_step(name, batch)
        self.run.step += 1
        return metrics | {"skipped_updates": self.run.learner.skipped_updates}

    def train(self) -> list[dict[str, Any]]:
        """Fine-tune for ``epochs`` passes; return each optimizer step's metrics (the held-out
        evaluations before and after are in ``metrics.jsonl``)."""
        cfg, run = self.config, self.run
        print(f"SFT config:\n{json.dumps(cfg.to_dict(), indent=2)}", flush=True)
        print(
            f"SFT on {len(self.transitions)} calls from {self.demo_episodes} demonstrations, "
            f"{self.batches_per_epoch} batches an epoch",
            flush=True,
        )
        history = []
        total = cfg.epochs * self.batches_per_epoch
        resumed_at = run.step  # 0, or the checkpoint's step after resume()
        if resumed_at == 0 and not run.resume_asked:
            check_run_folder(run.output_dir, resume=False)
        bar = tqdm(
            total=total, initial=resumed_at, desc="sft", unit="step", disable=not cfg.progress
        )
        try:
            if cfg.eval_tasks and resumed_at == 0:
                run.logs.log({"step": 0, **run.evaluate()})
            for epoch in range(resumed_at // self.batches_per_epoch, cfg.epochs):
                for index, (name, batch) in enumerate(self.batches(epoch)):
                    if epoch * self.batches_per_epoch + index < resumed_at:
                        continue  # done before the checkpoint (the order is the epoch's own)
                    started = time.perf_counter()
                    metrics = {"step": run.step + 1, "epoch": epoch + 1, "policy": name}
                    metrics |= self.sft_step(name, batch)
                    release_freed_memory()  # as the RL trainer does (memory.py)
                    run.train_seconds += time.perf_counter() - started
                    metrics["lr"] = run.learner.scheduler.get_last_lr()[0]
                    metrics["train_seconds"] = run.train_seconds
                    run.logs.log(metrics)
                    history.append(metrics)
                    bar.update(1)
                    bar.set_postfix(loss=f"{metrics['sft_loss']:.3f}", epoch=epoch + 1)
                    if cfg.save_every and run.step % cfg.save_every == 0:
                        run.save()
                run.sampling.sync(run.weights.names, run.step)
                if run.saved_step != run.step:
                    run.save()
            # (a resumed run that had finished and evaluated is not evaluated twice)
            if cfg.eval_tasks and not (run.step == resumed_at > 0 and self._evaluated_last()):
                run.logs.log({"step": run.step, **run.evaluate()})
        finally:
            bar.close()
        return history
