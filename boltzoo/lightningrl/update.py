"""One update of the policies' weights: the loss passes, the optimiser and its schedule.

``Learner.update`` on one step's credited calls, grouped by policy name:

1. per policy, calls with advantage 0 are left out (they add nothing to the policy gradient
   unless a KL or entropy term reads them), calls that continue each other are packed into one
   sequence (``sequences.pack_calls``), and the rows are cut into micro-batches by length;
2. each micro-batch's clipped surrogate loss (``loss.policy_loss``: PPO's ratio to the sampling
   logprobs, the call's advantage on each of its tokens, the KL to the policy's reference) is
   backpropagated times its share of the policy's batch, so the accumulated gradient is the
   gradient of the policy's mean (over its tokens, sequences or episodes, per ``aggregation``);
3. with replayed demonstrations, ``replay_coef`` times their cross-entropy is added:
   ``L = L_pg + replay_coef * CE`` (InstructGPT's PPO-ptx);
4. gradients are clipped per policy, one AdamW step updates all; a non-finite loss skips the
   whole step (counted in ``skipped_updates``).

The warm start (``sft.py``) uses the cross-entropy pass alone (:meth:`Learner.sft_step`).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from boltzoo.agents.models import bf16_where_native
from boltzoo.lightningrl.config import TrainerConfig
from boltzoo.lightningrl.loss import aggregate, policy_loss
from boltzoo.lightningrl.policies import PolicySet
from boltzoo.lightningrl.sequences import (
    PackedCalls,
    call_spans,
    micro_batches,
    pack_calls,
    response_logprobs,
)
from boltzoo.lightningrl.transitions import Transition

STATISTICS = ("pg_loss", "kl", "entropy", "clip_fraction", "ratio_mean")  # from LossOutput


def lr_factor(config: TrainerConfig, step: int) -> float:
    """Return the learning rate's factor at optimiser step ``step``: linear warm-up over
    ``warmup_steps``, then ``lr_schedule`` (constant, linear or cosine to 0 at ``steps``)."""
    if step < config.warmup_steps:
        return (step + 1) / config.warmup_steps
    progress = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
    if config.lr_schedule == "cosine":
        return 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))
    if config.lr_schedule == "linear":
        return max(0.0, 1 - progress)
    return 1.0


class Learner:
    """Updates a :class:`~boltzoo.lightningrl.policies.PolicySet` with one AdamW optimiser.

    Args:
        weights: the policies' weights.
        config: the run's config (the loss, ``lr`` and its schedule, ``micro_batch_tokens``,
            ``precision``...).
        device: the learner's device.
        pad_token_id: any token id (padding is masked).

    Attributes:
        micro_batch_tokens: the tokens of one micro-batch, padding included (``config``'s, or
            the device's default).
        use_bf16: whether the forward passes autocast to bf16 (``precision="bf16"`` where the
            device runs bf16 natively: ``models.native_bf16``; fp32 elsewhere, with a warning).
    """

    def __init__(
        self,
        weights: PolicySet,
        config: TrainerConfig,
        device: torch.device,
        *,
        pad_token_id: int,
    ) -> None:
        self.weights, self.config, self.device = weights, config, device
        # on a CPU, small micro-batches are faster and keep activations to a few GB
        self.micro_batch_tokens = config.micro_batch_tokens or (
            8192 if device.type == "cuda" else 1024
        )
        self.use_bf16 = bf16_where_native(
            config.precision == "bf16", device, "precision='bf16'", "the learner runs"
        )
        self.pad_token_id = pad_token_id
        self.optimizer = torch.optim.AdamW(
            weights.trainable(), lr=config.lr, weight_decay=config.weight_decay
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: lr_factor(self.config, step)
        )
        self.skipped_updates = 0  # steps whose loss was not finite

    def update(
        self,
        by_policy: dict[str, list[Transition]],
        replayed: dict[str, list[Transition]] | None = None,
    ) -> dict[str, float]:
        """Take ``epochs_per_step`` optimiser steps on each policy's calls in ``by_policy`` (and
        its ``replayed`` demonstration calls); return the loss statistics (means over the
        epochs; a policy's statistics weigh ``1 / len(by_policy)``).

        Each policy's loss is its own mean, so one policy's gradient never depends on another's
        calls; gradients are clipped per policy, then one AdamW step updates them all.
        """
        cfg, replayed = self.config, replayed or {}
        sums: dict[str, float] = {}
        self.weights.set_mode(True, list(by_policy))
        for _ in range(cfg.epochs_per_step):
            self.optimizer.zero_grad(set_to_none=True)
            finite = True
            for name, calls in by_policy.items():
                finite = self.policy_gradient_backward(name, calls, sums, 1 / len(by_policy))
                if finite and name in replayed:
                    # L = L_pg + replay_coef * CE(demonstrations)
                    ce = self.cross_entropy_backward(name, replayed[name], cfg.replay_coef)
                    finite = math.isfinite(ce)
                    sums["replay_loss"] = sums.get("replay_loss", 0.0) + ce / len(by_policy)
                if not finite:
                    break
            if not finite:  # a NaN or inf loss: no update from this step, and say so
                self.optimizer.zero_grad(set_to_none=True)
                self.skipped_updates += 1
                continue
            for name in by_policy:
                grad_norm = torch.nn.utils.clip_grad_norm_(
                    self.weights.parameters[name], cfg.max_grad_norm
                )
                sums["grad_norm"] = sums.get("grad_norm", 0.0) + float(grad_norm) / len(by_policy)
            self.optimizer.step()
        self.weights.set_mode(False)
        return {k: v / cfg.epochs_per_step for k, v in sums.items()}

    def policy_gradient_backward(
        self, name: str, transitions: list[Transition], sums: dict[str, float], weight: float
    ) -> bool:
        """Backpropagate policy ``name``'s loss over its transitions in micro-batches; add its
        statistics (times ``weight``) to ``sums``. Return False on a non-finite loss."""
        cfg = self.config
        by_episode = cfg.aggregation == "episode"
        total_tokens = sum(len(t.response_token_ids) for t in transitions)
        total_episodes = len({t.episode_id for t in transitions})
        total_sequences = len(transitions)
        if not (cfg.kl_coef or cfg.entropy_coef):
            # A call with advantage 0 adds exactly nothing to the policy gradient: it still counts
            # in the means' denominators above, but no forward or backward pass is spent on it
            # (in sparse-reward tasks most groups are all-0 or all-1 early on).
            # With episode means, an episode stays whole unless all of its calls are 0.
            live = {t.episode_id for t in transitions if t.advantage != 0}
            transitions = [
                t for t in transitions if t.advantage != 0 or (by_episode and t.episode_id in live)
            ]
        local: dict[str, float] = {}
        covered = 0.0
        # Calls that continue each other share one forward pass (the token mean allows it: a
        # token weighs the same wherever it sits; so does the sequence mean, taken per call);
        # episode means keep calls apart.
        packable = cfg.aggregation in ("token", "sequence")
        rows = pack_calls(transitions, merge=cfg.pack_calls and packable)
        batches = micro_batches(
            rows, self.micro_batch_tokens, by_episode=by_episode, share_prompts=cfg.share_prompts
        )
        for batch in batches:
            out = self.micro_batch_loss(name, batch)
            if not torch.isfinite(out.loss):
                return False
            # gradient accumulation: each micro-batch weighs its share of the policy's batch
            if cfg.aggregation == "token":
                share = sum(row.response_tokens for row in batch) / total_tokens
            elif cfg.aggregation == "sequence":
                share = sum(len(row.calls) for row in batch) / total_sequences
            else:
                share = len({row.episode_id for row in batch}) / total_episodes
            (out.loss * share).backward()
            covered += share
            for key in STATISTICS:
                local[key] = local.get(key, 0.0) + getattr(out, key) * share
        for key, value in local.items():  # the statistics are means over the calls trained on
            sums[key] = sums.get(key, 0.0) + value / covered * weight
        return True

    def micro_batch_loss(self, name: str, batch: list[PackedCalls]) -> Any:
        """Return policy ``name``'s loss on one micro-batch (a ``loss.LossOutput``)."""
        cfg = self.config
        model = self.weights.module(name)

        def logprobs_of(module: Any, with_entropy: bool = False) -> Any:
            # each call at the temperature it was sampled with (the config's if not recorded)
            return response_logprobs(
                module,
                batch,
                cfg.temperature,
                self.pad_token_id,
                with_entropy,
                per_call_temperature=True,
                share_prompts=cfg.share_prompts,
            )

        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.use_bf16):
            logprobs, mask, entropy = logprobs_of(model, with_entropy=cfg.entropy_coef > 0)
            ref = None
            if cfg.kl_coef:
                with torch.no_grad(), self.weights.reference(name) as reference:
                    ref = logprobs_of(reference)[0]
        # Per token: its call's advantage and sampling logprob (recomputed ones stand in for
        # calls whose backend gave none: their ratio is then 1).
        old = logprobs.detach().clone()
        advantages = torch.zeros_like(old)
        calls = torch.zeros(old.shape, dtype=torch.long, device=old.device)  # each token's call
        width = old.shape[1]
        spans = [(i, *span) for i, row in enumerate(batch) for span in call_spans(row, width)]
        for number, (i, call, begin, end) in enumerate(spans):
            advantages[i, begin:end] = call.advantage
            calls[i, begin:end] = number
            if call.logprobs is not None:
                old[i, begin:end] = torch.tensor(call.logprobs, device=old.device)
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
            episode_ids=[row.episode_id for row in batch],
            calls=calls,
        )

    def cross_entropy_backward(
        self, name: str, calls: list[Transition], scale: float = 1.0
    ) -> float:
        """Backpropagate ``scale`` times policy ``name``'s cross-entropy on the response tokens of
        ``calls`` (their mean over those tokens: the warm start's loss); return the loss
        (unscaled). A non-finite micro-batch stops it and its value is returned (NaN or inf):
        the caller then discards the gradients."""
        model = self.weights.module(name)
        total_tokens = sum(len(t.response_token_ids) for t in calls)
        loss_sum = 0.0
        # an episode's calls that continue each other are one sequence, one forward pass; calls
        # that start alike (one database's schema) share one pass over that start
        share = self.config.share_prompts
        for micro in micro_batches(pack_calls(calls), self.micro_batch_tokens, share_prompts=share):
            with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.use_bf16):
                logprobs, mask, _ = response_logprobs(
                    model, micro, 1.0, self.pad_token_id, share_prompts=share
                )
            # L = -sum_t m_t log p(y_t) / sum_t m_t over all the calls' response tokens
            weight = sum(row.response_tokens for row in micro) / total_tokens
            loss = -aggregate(logprobs, mask, "token") * weight
            if not torch.isfinite(loss):
                return float(loss)
            (loss * scale).backward()
            loss_sum += float(loss.detach())
        return loss_sum

    def sft_step(self, name: str, calls: list[Transition]) -> dict[str, float]:
        """Take one optimiser step of policy ``name`` on the cross-entropy of ``calls`` (the warm
        start's step); return its loss, gradient norm and response tokens."""
        self.weights.set_mode(True, [name])
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.cross_entropy_backward(name, calls)
        if not math.isfinite(loss):  # a NaN or inf loss changes nothing (as in RL), and is logged
            self.optimizer.zero_grad(set_to_none=True)
            self.skipped_updates += 1
        grad_norm = torch.nn.utils.clip_grad_norm_(
            self.weights.parameters[name], self.config.max_grad_norm
        )
        self.optimizer.step()
        self.scheduler.step()
        self.weights.set_mode(False, [name])
        return {
            "sft_loss": loss,
            "grad_norm": float(grad_norm),
            "tokens": sum(len(t.response_token_ids) for t in calls),
        }

    def state_dict(self) -> dict[str, Any]:
        """Return the optimiser's, the schedule's and the skip counter's state (checkpoints)."""
        return {
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "skipped_updates": self.skipped_updates,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (a checkpoint's state holds these keys among others)."""
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.skipped_updates = state["skipped_updates"]
