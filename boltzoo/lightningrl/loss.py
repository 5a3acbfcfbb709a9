"""The policy loss: the low level of LightningRL, a clipped policy gradient on one call's tokens.

Each transition is a single-call sample with one advantage; every response token of the call
shares it. The loss is PPO's clipped surrogate against the sampling logprobs (the policy that
generated the tokens), with the dual clip for negative advantages, an optional KL penalty to a
frozen reference policy and an optional entropy bonus, aggregated over tokens, sequences or
episodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import get_args

import torch

from boltzoo.lightningrl.config import Aggregation, KLEstimator

AGGREGATIONS = get_args(Aggregation)
KL_ESTIMATORS = get_args(KLEstimator)


@dataclass
class LossOutput:
    """The loss to backward and its parts as Python floats (for logging)."""

    loss: torch.Tensor  # scalar to backward
    pg_loss: float  # the clipped policy-gradient term, aggregated as the loss is
    kl: float  # the KL to the reference, aggregated as the loss is (0 without a reference)
    entropy: float  # the token entropy, aggregated as the loss is (0 without entropies)
    clip_fraction: float  # share of real tokens where the clipped surrogate was the active one
    ratio_mean: float  # mean ratio over real tokens
    tokens: int  # real (unmasked) tokens
    dual_clip_fraction: float = 0.0  # share of real tokens where the dual clip was active


def kl_penalty(
    logprobs: torch.Tensor, ref_logprobs: torch.Tensor, estimator: str = "k3"
) -> torch.Tensor:
    """Return the per-token KL(pi || pi_ref) estimate "k1", "k2" or "k3" (Schulman's)."""
    log_ratio = logprobs - ref_logprobs
    if estimator == "k1":
        # k1 = logp - logp_ref
        return log_ratio
    if estimator == "k2":
        # k2 = (logp - logp_ref)^2 / 2
        return 0.5 * log_ratio**2
    if estimator == "k3":
        # k3 = exp(logp_ref - logp) - (logp_ref - logp) - 1
        return torch.exp(-log_ratio) + log_ratio - 1
    raise ValueError(f"unknown kl_estimator {estimator!r}; choose one of {list(KL_ESTIMATORS)}")


def aggregate(
    values: torch.Tensor,
    mask: torch.Tensor,
    aggregation: str = "token",
    episode_ids: Sequence[str] | None = None,
    calls: torch.Tensor | None = None,
) -> torch.Tensor:
    """Return the mean of per-token ``values`` over the real tokens, by ``aggregation``.

    "token": the mean over every real token of the batch; "sequence": each sequence's token mean,
    then the mean over sequences; "episode": sequence means averaged per episode
    (``episode_ids``, one per sequence), then over episodes. Sequences without real tokens do not
    count. Masked positions never reach the result (``values`` there may hold anything finite).
    With ``calls`` ((B, T) integers: the call each token belongs to, numbered across the batch),
    "sequence" means each call's token mean, then the mean over calls: the calls packed into one
    sequence (``pack_calls``) weigh as they would apart.
    """
    mask = mask.to(values.dtype)
    if aggregation == "token":
        # L = sum_{b,t} m_bt x_bt / sum_{b,t} m_bt
        return (values * mask).sum() / mask.sum().clamp(min=1)
    if aggregation == "sequence" and calls is not None:
        real = mask.bool()
        ids, x = calls[real], values[real]
        if not ids.numel():
            return (values * mask).sum()  # zero, still in the graph
        sums = x.new_zeros(int(ids.max()) + 1).index_add(0, ids, x)
        counts = x.new_zeros(sums.shape).index_add(0, ids, torch.ones_like(x))
        present = counts > 0
        # L = mean_c x_c,   x_c = sum_{t in c} x_t / |c|
        return (sums[present] / counts[present]).mean()
    lengths = mask.sum(dim=1)
    has_tokens = lengths > 0
    # x_b = sum_t m_bt x_bt / sum_t m_bt
    per_sequence = (values * mask).sum(dim=1) / lengths.clamp(min=1)
    if aggregation == "sequence":
        # L = mean_b x_b
        return (per_sequence * has_tokens).sum() / has_tokens.sum().clamp(min=1)
    if aggregation == "episode":
        if episode_ids is None or len(episode_ids) != values.shape[0]:
            raise ValueError(
                f"aggregation='episode' needs episode_ids, one per sequence ({values.shape[0]})"
            )
        episodes: dict[str, list[int]] = {}
        for b, episode_id in enumerate(episode_ids):
            if has_tokens[b]:
                episodes.setdefault(episode_id, []).append(b)
        if not episodes:
            return (values * mask).sum()  # zero, still in the graph
        # L = mean_e mean_{b in e} x_b
        return torch.stack([per_sequence[b].mean() for b in episodes.values()]).mean()
    raise ValueError(f"unknown aggregation {aggregation!r}; choose one of {list(AGGREGATIONS)}")


def policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_eps: float = 0.2,
    clip_eps_high: float | None = None,
    dual_clip: float | None = 3.0,
    ref_logprobs: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    kl_estimator: str = "k3",
    entropy: torch.Tensor | None = None,
    entropy_coef: float = 0.0,
    aggregation: str = "token",
    episode_ids: Sequence[str] | None = None,
    calls: torch.Tensor | None = None,
) -> LossOutput:
    """Return the clipped policy-gradient loss of a batch of calls, and its parts.

    Args:
        logprobs: (B, T) logprobs of the response tokens under the policy being trained.
        old_logprobs: (B, T) the sampling logprobs (no gradient flows into them).
        advantages: (B,) one advantage per sequence, shared by its tokens, or (B, T) one per
            token (a packed sequence of several calls, each with its own).
        mask: (B, T) 1 for real response tokens, 0 for padding.
        clip_eps: the ratio is clipped to [1 - clip_eps, 1 + clip_eps_high].
        clip_eps_high: the clip's upper side (defaults to clip_eps; a larger one is DAPO's
            clip-higher).
        dual_clip: for A < 0, a token's loss is at most -dual_clip * A (None: off; must be > 1).
        ref_logprobs: (B, T) a reference policy's logprobs, for the KL penalty.
        kl_coef: the KL penalty's weight.
        kl_estimator: the KL estimated per token by "k1" (logp - ref), "k2"
            ((logp - ref)^2 / 2) or "k3" (exp(ref - logp) - (ref - logp) - 1).
        entropy: (B, T) token entropies.
        entropy_coef: the loss subtracts entropy_coef * entropy.
        aggregation: "token", "sequence" or "episode" (with episode_ids); see :func:`aggregate`.
        calls: (B, T) the call each token belongs to (packed sequences), for "sequence".
    """
    if logprobs.shape != old_logprobs.shape or logprobs.shape != mask.shape:
        raise ValueError(
            f"logprobs {tuple(logprobs.shape)}, old_logprobs {tuple(old_logprobs.shape)} and mask "
            f"{tuple(mask.shape)} must have the same (B, T) shape"
        )
    if advantages.shape not in (logprobs.shape[:1], logprobs.shape):
        raise ValueError(
            f"advantages must have one value per sequence, shape ({logprobs.shape[0]},), or one "
            f"per token, {tuple(logprobs.shape)}; got {tuple(advantages.shape)}"
        )
    if dual_clip is not None and dual_clip <= 1.0:
        raise ValueError(f"dual_clip must be above 1 (or None), got {dual_clip}")
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"unknown aggregation {aggregation!r}; choose one of {list(AGGREGATIONS)}")
    if kl_coef and ref_logprobs is None:
        raise ValueError("kl_coef is set but no ref_logprobs were given")
    if entropy_coef and entropy is None:
        raise ValueError("entropy_coef is set but no token entropies (entropy=) were given")
    eps_low, eps_high = clip_eps, clip_eps if clip_eps_high is None else clip_eps_high
    real = mask.bool()
    A = advantages.detach().to(logprobs.dtype)
    if A.dim() == 1:
        A = A.unsqueeze(1)  # (B, 1): one per sequence, broadcast over its tokens

    # ratio = exp(logp - logp_old)   (padding set to logp = logp_old, so ratio = 1 there)
    log_ratio = torch.where(real, logprobs - old_logprobs.detach(), torch.zeros_like(logprobs))
    ratio = torch.exp(log_ratio)
    # surr1 = ratio * A
    surr1 = ratio * A
    # surr2 = clip(ratio, 1 - eps_low, 1 + eps_high) * A      <- the ratio is clipped here
    surr2 = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high) * A
    # pg = -min(surr1, surr2)
    pg = -torch.min(surr1, surr2)
    # dual clip, for A < 0: pg = min(pg, -c * A)
    if dual_clip is not None:
        pg = torch.where(A < 0, torch.min(pg, -dual_clip * A), pg)
    pg_loss = aggregate(pg, mask, aggregation, episode_ids, calls)
    loss = pg_loss

    kl = torch.zeros((), dtype=logprobs.dtype)
    if ref_logprobs is not None:
        ref = torch.where(real, ref_logprobs.detach(), logprobs.detach())  # KL 0 on padding
        # kl_t = k(logp_t, logp_ref_t); loss += kl_coef * mean(kl)
        kl = aggregate(
            kl_penalty(logprobs, ref, kl_estimator), mask, aggregation, episode_ids, calls
        )
        loss = loss + kl_coef * kl

    mean_entropy = torch.zeros((), dtype=logprobs.dtype)
    if entropy is not None:
        # loss -= entropy_coef * mean(H)
        mean_entropy = aggregate(
            torch.where(real, entropy, torch.zeros_like(entropy)),
            mask,
            aggregation,
            episode_ids,
            calls,
        )
        loss = loss - entropy_coef * mean_entropy

    with torch.no_grad():
        tokens = int(real.sum())
        n = max(tokens, 1)
        # clipped: A > 0 and ratio > 1 + eps_high, or A < 0 and ratio < 1 - eps_low
        clipped = ((A > 0) & (ratio > 1.0 + eps_high)) | ((A < 0) & (ratio < 1.0 - eps_low))
        dual = (A < 0) & (ratio > dual_clip) if dual_clip is not None else torch.zeros_like(real)
        return LossOutput(
            loss=loss,
            pg_loss=float(pg_loss),
            kl=float(kl),
            entropy=float(mean_entropy),
            clip_fraction=float((clipped & real).sum()) / n,
            ratio_mean=float((ratio * real).sum()) / n,
            tokens=tokens,
            dual_clip_fraction=float((dual & real).sum()) / n,
        )
