"""Advantages: each transition's credited reward compared with a baseline.

The estimators are critic-free, as in LightningRL: a transition is compared with the other
transitions of its group (GRPO, RLOO) or with the whole batch (REINFORCE++). The group of a
transition is set by its key (:func:`group_keys`): the same task, optionally the same agent and
the same turn. A group of one has nothing to be compared with; its advantage is 0.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import get_args

import torch

from boltzoo.lightningrl.config import Estimator, GroupBy
from boltzoo.lightningrl.transitions import Transition

GROUP_BY = get_args(GroupBy)
ESTIMATORS = get_args(Estimator)


def group_keys(transitions: Sequence[Transition], group_by: str) -> list[tuple]:
    """Return each transition's key: (task_id,), (task_id, agent) or (task_id, agent, turn)."""
    if group_by == "task":
        return [(t.task_id,) for t in transitions]
    if group_by == "task_agent":
        return [(t.task_id, t.agent) for t in transitions]
    if group_by == "task_agent_turn":
        return [(t.task_id, t.agent, t.turn) for t in transitions]
    raise ValueError(f"unknown group_by {group_by!r}; choose one of {list(GROUP_BY)}")


def _groups(keys: Sequence[tuple]) -> list[list[int]]:
    """Return the indices of each group's members, groups in order of first appearance."""
    members: dict[tuple, list[int]] = {}
    for i, key in enumerate(keys):
        members.setdefault(key, []).append(i)
    return list(members.values())


def _float(rewards: torch.Tensor | Sequence[float]) -> torch.Tensor:
    rewards = torch.as_tensor(rewards)
    return rewards if rewards.is_floating_point() else rewards.to(torch.get_default_dtype())


def grpo(
    rewards: torch.Tensor, keys: Sequence[tuple], normalize_std: bool = True, eps: float = 1e-6
) -> torch.Tensor:
    """Return GRPO advantages: rewards normalised within their group (size-1 groups: 0).

    The std has Bessel's correction (``torch.std``'s default, as TRL); ``normalize_std=False``
    only subtracts the group mean (Dr. GRPO).
    """
    rewards = _float(rewards)
    advantages = torch.zeros_like(rewards)
    for members in _groups(keys):
        if len(members) < 2:
            continue
        r = rewards[members]
        if normalize_std:
            # A_i = (r_i - mean(r_group)) / (std(r_group) + eps)
            advantages[members] = (r - r.mean()) / (r.std() + eps)
        else:
            # A_i = r_i - mean(r_group)
            advantages[members] = r - r.mean()
    return advantages


def rloo(rewards: torch.Tensor, keys: Sequence[tuple]) -> torch.Tensor:
    """Return RLOO advantages: each reward minus the mean of the others of its group (size 1: 0)."""
    rewards = _float(rewards)
    advantages = torch.zeros_like(rewards)
    for members in _groups(keys):
        G = len(members)
        if G < 2:
            continue
        r = rewards[members]
        # A_i = r_i - (sum_j r_j - r_i) / (G - 1) = G / (G - 1) * (r_i - mean(r_group))
        advantages[members] = G / (G - 1) * (r - r.mean())
    return advantages


def reinforce_pp(rewards: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Return REINFORCE++ advantages: rewards normalised over the whole batch (batch of 1: 0)."""
    rewards = _float(rewards)
    if rewards.numel() < 2:
        return torch.zeros_like(rewards)
    # A_i = (r_i - mean(r_batch)) / (std(r_batch) + eps)
    return (rewards - rewards.mean()) / (rewards.std() + eps)


@dataclass
class GroupStats:
    """The sizes of the groups the advantages were computed in."""

    groups: int
    mean_size: float
    min_size: int
    max_size: int
    singletons: int  # groups of one member, whose advantage is 0 under GRPO and RLOO
    # groups (of two or more) whose rewards are all equal: under GRPO and RLOO their advantage
    # is 0 too, so they teach nothing (TRL logs their share as frac_reward_zero_std)
    zero_std: int = 0


def _estimate(
    estimator: str, rewards: torch.Tensor, keys: list[tuple], normalize_std: bool
) -> torch.Tensor:
    if estimator == "grpo":
        return grpo(rewards, keys, normalize_std=normalize_std)
    if estimator == "rloo":
        return rloo(rewards, keys)
    if estimator == "reinforce++":
        return reinforce_pp(rewards)
    raise ValueError(f"unknown estimator {estimator!r}; choose one of {list(ESTIMATORS)}")


def compute_advantages(
    transitions: list[Transition],
    estimator: str = "grpo",
    group_by: str = "task",
    *,
    normalize_std: bool = True,
    per_episode: bool = False,
) -> GroupStats:
    """Write every transition's ``advantage`` in place; return the sizes of the groups.

    Args:
        transitions: from :func:`~boltzoo.lightningrl.transitions.flatten`.
        estimator: "grpo", "rloo" or "reinforce++" (batch-normalised; the groups only
            show in the stats).
        group_by: "task", "task_agent" or "task_agent_turn" (see :func:`group_keys`).
        normalize_std: GRPO divides by the group's std (False: Dr. GRPO); others ignore it.
        per_episode: one sample per (episode, agent) instead of one per call: its value is the
            mean credited reward of the agent's calls in the episode; these values are compared
            within groups keyed without the turn ("task_agent_turn" acts as "task_agent"), and
            the resulting advantage is copied to every call of that agent in that episode.

    Groups of size one get advantage 0 under GRPO and RLOO; a warning says how many there are.
    """
    if estimator not in ESTIMATORS:
        raise ValueError(f"unknown estimator {estimator!r}; choose one of {list(ESTIMATORS)}")
    if group_by not in GROUP_BY:
        raise ValueError(f"unknown group_by {group_by!r}; choose one of {list(GROUP_BY)}")
    if not transitions:
        return GroupStats(groups=0, mean_size=0.0, min_size=0, max_size=0, singletons=0)

    if per_episode:
        # One sample per (episode, agent): the mean credited reward of its calls.
        units = _groups([(t.episode_id, t.agent) for t in transitions])
        firsts = [transitions[members[0]] for members in units]
        rewards = torch.tensor(
            [sum(transitions[i].reward for i in m) / len(m) for m in units], dtype=torch.float64
        )
        keys = group_keys(firsts, "task_agent" if group_by == "task_agent_turn" else group_by)
    else:
        units = [[i] for i in range(len(transitions))]
        rewards = torch.tensor([t.reward for t in transitions], dtype=torch.float64)
        keys = group_keys(transitions, group_by)

    advantages = _estimate(estimator, rewards, keys, normalize_std)
    for members, advantage in zip(units, advantages.tolist(), strict=True):
        for i in members:
            transitions[i].advantage = advantage

    groups = _groups(keys)
    sizes = [len(m) for m in groups]
    stats = GroupStats(
        groups=len(sizes),
        mean_size=sum(sizes) / len(sizes),
        min_size=min(sizes),
        max_size=max(sizes),
        singletons=sum(1 for s in sizes if s == 1),
        zero_std=sum(1 for m in groups if len(m) > 1 and len(set(rewards[m].tolist())) == 1),
    )
    if stats.singletons and estimator != "reinforce++":
        warnings.warn(
            f"{stats.singletons} of {stats.groups} advantage groups have a single member; their "
            f"advantage is 0 (nothing to compare with). Roll out several episodes per task "
            f"(group_size > 1), or group by a coarser key than {group_by!r}",
            stacklevel=2,
        )
    return stats
