"""The LightningRL trainer: rollouts, credit, advantages and clipped policy-gradient updates.

One step, top to bottom (``Trainer.train_step``):

1. sample ``tasks_per_step`` tasks; run ``group_size`` rollouts of each (``boltzoo.rollout``);
2. drop every group that holds a failed episode (policy or env error, timeout, over-long prompt);
3. ``flatten``: one transition per LLM call of the trained agents, credited by ``credit``;
4. ``compute_advantages`` within groups of the same task;
5. optimise: micro-batches bucketed by length (no compute on padding beyond the bucket),
   gradients accumulated, clipped, one AdamW step per epoch, the learning-rate schedule stepped;
   a non-finite loss skips the update and is logged;
6. the sampling policy uses the new weights at once (they are the same weights in process) and
   its Completions carry the next policy version.

Agents not in ``train_agents`` act with a frozen copy of the initial model, so their weights
stay bit-identical. Checkpoints (``checkpoint.py``) make runs resumable after a kill.
"""

from __future__ import annotations

import copy
import json
import math
import random
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from boltzoo.agents.models import load_model
from boltzoo.agents.transformers_policy import TransformersPolicy
from boltzoo.lightningrl.advantages import compute_advantages
from boltzoo.lightningrl.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
from boltzoo.lightningrl.config import TrainerConfig
from boltzoo.lightningrl.loss import policy_loss
from boltzoo.lightningrl.rollout import rollout
from boltzoo.lightningrl.transitions import Transition, flatten, select_agents
from boltzoo.registration import make, resolve_env_id


def micro_batches(transitions: list[Transition], max_tokens: int) -> list[list[Transition]]:
    """Return the transitions in micro-batches of similar length (sorted), each padded size
    ``len(batch) * longest`` at most ``max_tokens`` (a longer single sequence goes alone)."""
    order = sorted(transitions, key=lambda t: len(t.prompt_token_ids) + len(t.response_token_ids))
    batches: list[list[Transition]] = []
    current: list[Transition] = []
    for t in order:
        length = len(t.prompt_token_ids) + len(t.response_token_ids)
        if current and (len(current) + 1) * length > max_tokens:
            batches.append(current)
            current = []
        current.append(t)
    if current:
        batches.append(current)
    return batches


def response_logprobs(
    model: Any,
    batch: list[Transition],
    temperature: float,
    pad_token_id: int,
    with_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Return ``(logprobs, mask, entropy)`` of the response tokens, each (B, R).

    Sequences are left-padded (prompt + response end at the right edge, positions counted
    from each sequence's first real token, as in sampling), and only the last R + 1 positions'
    logits are computed: ``log_softmax(z / T)`` of the token that followed each position.
    """
    device = next(model.parameters()).device
    lengths = [len(t.prompt_token_ids) + len(t.response_token_ids) for t in batch]
    width, longest_response = max(lengths), max(len(t.response_token_ids) for t in batch)
    input_ids = torch.full((len(batch), width), pad_token_id, dtype=torch.long)
    attention = torch.zeros((len(batch), width), dtype=torch.long)
    mask = torch.zeros((len(batch), longest_response), dtype=torch.bool)
    for row, (t, length) in enumerate(zip(batch, lengths, strict=True)):
        input_ids[row, width - length :] = torch.tensor(t.prompt_token_ids + t.response_token_ids)
        attention[row, width - length :] = 1
        mask[row, longest_response - len(t.response_token_ids) :] = True
    input_ids, attention, mask = input_ids.to(device), attention.to(device), mask.to(device)
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    out = model(
        input_ids=input_ids,
        attention_mask=attention,
        position_ids=positions,
        logits_to_keep=longest_response + 1,
    )
    # Position p predicts token p + 1: the last R + 1 logits, less the very last, predict the
    # last R tokens (each row's response, right-aligned).
    logits = out.logits[:, :-1, :].float()
    if temperature > 0:
        logits = logits / temperature
    logprobs_all = torch.log_softmax(logits, dim=-1)
    targets = input_ids[:, width - longest_response :]
    logprobs = logprobs_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    entropy = None
    if with_entropy:
        entropy = -(logprobs_all.exp() * logprobs_all).sum(-1)
    return logprobs, mask, entropy


class Trainer:
    """Trains the selected agents' policy with LightningRL; see the module docstring."""

    def __init__(self, config: TrainerConfig, *, model: Any = None, tokenizer: Any = None):
        self.config = cfg = config
        self.env_id = resolve_env_id(cfg.env)
        self.output_dir = Path(cfg.output_dir)
        self.output_dir.mkdir(parents=True, exist_ok=True)
        self.checkpoint_dir = self.output_dir / "checkpoints"
        self.metrics_path = self.output_dir / "metrics.jsonl"
        _seed_everything(cfg.seed)

        device = cfg.device or ("cuda" if torch.cuda.is_available() else "cpu")
        if model is None:
            model, tokenizer = load_model(cfg.model, device=device)
            model = model.float()  # the learner's master weights stay fp32; bf16 is autocast
        self.model = model.to(device)
        self.device = torch.device(device)
        self.tokenizer = tokenizer
        self.use_bf16 = cfg.precision == "bf16" and (
            self.device.type == "cuda"
            and torch.cuda.is_bf16_supported()
            or self.device.type == "cpu"
        )
        sampling = dict(
            max_new_tokens=cfg.max_new_tokens,
            temperature=cfg.temperature,
            top_p=cfg.top_p,
            max_prompt_tokens=cfg.max_prompt_tokens,
        )
        self.policy = TransformersPolicy(
            self.model, tokenizer, name=str(cfg.model), seed=cfg.seed, **sampling
        )
        env = make(self.env_id, **cfg.env_kwargs)
        self.agents = list(env.unwrapped.possible_agents)
        self.num_tasks = env.unwrapped.num_tasks
        self.train_agents = select_agents(self.agents, cfg.train_agents)
        frozen = None
        if set(self.agents) - self.train_agents or cfg.kl_coef:
            frozen = copy.deepcopy(self.model).eval().requires_grad_(False)
        self.reference = frozen if cfg.kl_coef else None
        self.frozen_policy = (
            TransformersPolicy(frozen, tokenizer, name=f"{cfg.model}@0", seed=cfg.seed, **sampling)
            if frozen is not None and set(self.agents) - self.train_agents
            else None
        )

        self.optimizer = torch.optim.AdamW(
            [p for p in self.model.parameters() if p.requires_grad],
            lr=cfg.lr,
            weight_decay=cfg.weight_decay,
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self._lr_factor)
        self.step = 0
        self.task_rng = np.random.default_rng(cfg.seed)
        self.skipped_updates = 0

    # --- schedule --------------------------------------------------------------------------

    def _lr_factor(self, step: int) -> float:
        cfg = self.config
        if step < cfg.warmup_steps:
            return (step + 1) / cfg.warmup_steps
        progress = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
        if cfg.lr_schedule == "cosine":
            return 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))
        if cfg.lr_schedule == "linear":
            return max(0.0, 1 - progress)
        return 1.0

    # --- one step --------------------------------------------------------------------------

    def policies(self) -> dict[str, Any]:
        """Return the policy of every agent: the trained one, or the frozen initial copy."""
        return {
            agent: self.policy if agent in self.train_agents else self.frozen_policy
            for agent in self.agents
        }

    def train_step(self) -> dict[str, Any]:
        """Run one LightningRL step; return its metrics."""
        cfg = self.config
        started = time.perf_counter()
        tasks = self.task_rng.choice(
            self.num_tasks, size=cfg.tasks_per_step, replace=self.num_tasks < cfg.tasks_per_step
        )
        self.model.eval()
        episodes = rollout(
            self.env_id,
            self.policies(),
            tasks=[int(t) for t in tasks],
            group_size=cfg.group_size,
            seed=cfg.seed * 1_000_003 + self.step * 1_009,
            episode_timeout_s=cfg.episode_timeout_s,
            progress=False,
            **cfg.env_kwargs,
        )
        rollout_seconds = time.perf_counter() - started

        # 2. a group with a failed episode has no fair baseline: drop it whole
        failed_groups = {e.metadata.get("group") for e in episodes if e.failed}
        kept = [e for e in episodes if e.metadata.get("group") not in failed_groups]
        # 3-4. credit each LLM call, then baselines within groups
        transitions = flatten(
            kept, cfg.credit, sorted(self.train_agents), tokenizer=self.tokenizer, gamma=cfg.gamma
        )
        group_stats = None
        if transitions:
            group_stats = compute_advantages(
                transitions,
                cfg.estimator,
                cfg.group_by,
                normalize_std=cfg.normalize_std,
                per_episode=cfg.per_episode_advantage,
            )
        update_started = time.perf_counter()
        update = self.update(transitions) if transitions else {"skipped": True}
        update_seconds = time.perf_counter() - update_started
        self.scheduler.step()
        self.policy.version += 1
        self.step += 1

        ok = [e for e in episodes if not e.failed]
        advantages = [t.advantage for t in transitions]
        train_tokens = sum(len(t.response_token_ids) for t in transitions)
        return {
            "step": self.step,
            "reward": float(np.mean([t.reward for t in transitions])) if transitions else 0.0,
            "score": float(np.mean([e.score or 0.0 for e in ok])) if ok else 0.0,
            "success_rate": float(np.mean([bool(e.success) for e in ok])) if ok else 0.0,
            "episodes": len(episodes),
            "failed_episodes": len(episodes) - len(ok),
            "dropped_groups": len(failed_groups),
            "transitions": len(transitions),
            "advantage_mean": float(np.mean(advantages)) if advantages else 0.0,
            "advantage_std": float(np.std(advantages)) if advantages else 0.0,
            "group_size_mean": group_stats.mean_size if group_stats else 0.0,
            "singleton_groups": group_stats.singletons if group_stats else 0,
            "lr": self.scheduler.get_last_lr()[0],
            "rollout_seconds": rollout_seconds,
            "update_seconds": update_seconds,
            "train_tokens_per_second": train_tokens / update_seconds if update_seconds else 0.0,
            "skipped_updates": self.skipped_updates,
            **{k: v for k, v in update.items() if k != "skipped"},
        }

    def update(self, transitions: list[Transition]) -> dict[str, Any]:
        """Optimise on the step's transitions; return loss statistics."""
        cfg = self.config
        total_tokens = sum(len(t.response_token_ids) for t in transitions)
        sums: dict[str, float] = {}
        self.model.train()
        for _ in range(cfg.epochs_per_step):
            self.optimizer.zero_grad(set_to_none=True)
            finite = True
            for batch in micro_batches(transitions, cfg.micro_batch_tokens):
                out = self._micro_batch_loss(batch)
                tokens = sum(len(t.response_token_ids) for t in batch)
                # gradient accumulation: each micro-batch weighs its share of the step's batch
                share = (
                    tokens / total_tokens
                    if cfg.aggregation == "token"
                    else len(batch) / len(transitions)
                )
                if not torch.isfinite(out.loss):
                    finite = False
                    break
                (out.loss * share).backward()
                for name in ("pg_loss", "kl", "entropy", "clip_fraction", "ratio_mean"):
                    sums[name] = sums.get(name, 0.0) + getattr(out, name) * share
            if not finite:  # a NaN or inf loss: no update from this step, and say so
                self.optimizer.zero_grad(set_to_none=True)
                self.skipped_updates += 1
                continue
            grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm)
            sums["grad_norm"] = sums.get("grad_norm", 0.0) + float(grad_norm)
            self.optimizer.step()
        self.model.eval()
        return {k: v / cfg.epochs_per_step for k, v in sums.items()}

    def _micro_batch_loss(self, batch: list[Transition]) -> Any:
        cfg = self.config
        temperature = batch[0].temperature if batch[0].temperature is not None else cfg.temperature
        pad = self.policy.pad_token_id
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.use_bf16):
            logprobs, mask, entropy = response_logprobs(
                self.model, batch, temperature, pad, with_entropy=cfg.entropy_coef > 0
            )
            ref = None
            if self.reference is not None:
                with torch.no_grad():
                    ref, _, _ = response_logprobs(self.reference, batch, temperature, pad)
        width = logprobs.shape[1]
        # Sampling logprobs, right-aligned like the response tokens; recomputed ones stand in
        # for calls whose backend gave none (their ratio is then 1).
        old = logprobs.detach().clone()
        for row, t in enumerate(batch):
            if t.logprobs is not None:
                old[row, width - len(t.logprobs) :] = torch.tensor(t.logprobs, device=old.device)
        advantages = torch.tensor([t.advantage for t in batch], device=logprobs.device)
        return policy_loss(
            logprobs,
            old,
            advantages,
            mask,
            clip_eps=cfg.clip_eps,
            clip_eps_high=cfg.clip_eps_high,
            dual_clip=cfg.dual_clip,
            ref_logprobs=ref,
            kl_coef=cfg.kl_coef,
            kl_estimator=cfg.kl_estimator,
            entropy=entropy,
            entropy_coef=cfg.entropy_coef,
            aggregation=cfg.aggregation,
        )

    # --- evaluation ------------------------------------------------------------------------

    def evaluate(self) -> dict[str, float]:
        """Return held-out success rate and mean score, greedy decoding, without updating."""
        cfg = self.config
        kwargs = cfg.env_kwargs | cfg.eval_env_kwargs
        num_tasks = make(self.env_id, **kwargs).unwrapped.num_tasks
        sampling, self.policy.sampling = (
            self.policy.sampling,
            replace(self.policy.sampling, temperature=0.0),
        )
        generator_state = self.policy.generator.get_state()
        try:
            episodes = rollout(
                self.env_id,
                self.policies(),
                tasks=range(min(cfg.eval_tasks, num_tasks)),
                seed=cfg.seed,
                progress=False,
                **kwargs,
            )
        finally:
            self.policy.sampling = sampling
            self.policy.generator.set_state(generator_state)
        ok = [e for e in episodes if not e.failed]
        n = max(1, len(episodes))
        return {
            "eval_success_rate": sum(bool(e.success) for e in ok) / n,
            "eval_score": sum(e.score or 0.0 for e in ok) / n,
            "eval_failed": len(episodes) - len(ok),
        }

    # --- the loop --------------------------------------------------------------------------

    def train(self) -> list[dict[str, Any]]:
        """Run (or continue) the training loop to ``config.steps``; return each step's metrics."""
        cfg = self.config
        print(f"LightningRL config:\n{json.dumps(cfg.to_dict(), indent=2)}", flush=True)
        history = []
        bar = tqdm(
            total=cfg.steps,
            initial=self.step,
            desc="lightningrl",
            unit="step",
            disable=not cfg.progress,
        )
        if cfg.eval_every and self.step == 0:
            self._log({"step": 0, **self.evaluate()})
        while self.step < cfg.steps:
            metrics = self.train_step()
            if cfg.eval_every and self.step % cfg.eval_every == 0:
                metrics.update(self.evaluate())
            self._log(metrics)
            history.append(metrics)
            bar.update(1)
            bar.set_postfix(reward=f"{metrics['reward']:.3f}", score=f"{metrics['score']:.3f}")
            if cfg.save_every and self.step % cfg.save_every == 0:
                self.save()
        bar.close()
        self.save()
        return history

    def _log(self, metrics: dict[str, Any]) -> None:
        with self.metrics_path.open("a") as f:
            f.write(json.dumps(metrics) + "\n")

    # --- checkpoints -----------------------------------------------------------------------

    def save(self) -> Path:
        """Write a checkpoint of the current step (atomically); return its folder."""
        state = {
            "step": self.step,
            "policy_version": self.policy.version,
            "skipped_updates": self.skipped_updates,
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "task_rng": self.task_rng.bit_generator.state,
            "sampling_generator": self.policy.generator.get_state(),
            "torch_rng": torch.get_rng_state(),
            "numpy_rng": np.random.get_state(),
            "python_rng": random.getstate(),
        }
        return save_checkpoint(
            self.checkpoint_dir, self.step, self.model.state_dict(), state, self.config.to_dict()
        )

    def resume(self) -> bool:
        """Continue from the newest checkpoint in ``output_dir``; return whether there was one."""
        folder = latest_checkpoint(self.checkpoint_dir)
        if folder is None:
            return False
        weights, state = load_checkpoint(folder)
        self.model.load_state_dict(weights)
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.step = state["step"]
        self.policy.version = state["policy_version"]
        self.skipped_updates = state["skipped_updates"]
        self.task_rng.bit_generator.state = state["task_rng"]
        self.policy.generator.set_state(state["sampling_generator"])
        torch.set_rng_state(state["torch_rng"])
        np.random.set_state(state["numpy_rng"])
        random.setstate(state["python_rng"])
        # Metrics logged after the checkpoint belong to work that is now redone.
        if self.metrics_path.exists():
            lines = self.metrics_path.read_text().splitlines()
            kept = [line for line in lines if json.loads(line)["step"] <= self.step]
            self.metrics_path.write_text("".join(line + "\n" for line in kept))
        return True


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
