"""Which tasks a training step draws: uniformly, or where the policy can learn most.

GRPO learns only from groups that hold both a success and a failure: a group of ``G`` samples
of a task the policy solves with probability ``p`` is mixed with probability
``1 - p**G - (1 - p)**G``, and the variance of its reward is ``p (1 - p)``. Drawing tasks in
proportion to that *learnability* (Foster & Foerster, 2025, "Learning to Reason at the Frontier
of Learnability"; Kimi k1.5's prioritised sampling is a cousin) spends the rollouts of a step
where its gradient comes from.

Tasks are pooled by a field they share (sql-v0's ``template``, math-v0's ``template`` or
``level``; ``None``: each task alone), because the tasks of a split rarely repeat within a run
while their templates do. Each pool keeps decayed counts of its training episodes' outcomes;
its success estimate is the posterior mean under a uniform Beta(1, 1) prior::

    p_g = (successes_g + 1) / (episodes_g + 2)        weight_g = p_g (1 - p_g)

A pool never tried weighs 0.25, the most, so every pool is tried; a pool that always fails or
always succeeds fades towards 0 but never reaches it. A task is drawn with probability
``weight_g / |g|`` (normalised), without replacement within a step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


class LearnabilitySampler:
    """Draw task indices in proportion to their pool's estimated reward variance.

    Args:
        pools: The pool (a field's value) of each task, in task order.
        rng: The generator every draw uses (the trainer's ``task_rng``, saved in checkpoints).
        decay: Each step's old counts are multiplied by it before the new ones are added, so
            the estimates follow the policy as it learns (1.0: never forget).
    """

    def __init__(self, pools: Sequence[str], rng: np.random.Generator, decay: float = 0.9):
        if not pools:
            raise ValueError("LearnabilitySampler needs at least one task")
        if not 0.0 < decay <= 1.0:
            raise ValueError(f"decay must be in (0, 1], got {decay}")
        self.names = sorted(set(pools))
        index = {name: i for i, name in enumerate(self.names)}
        self.pool_of = np.array([index[name] for name in pools])
        self.pool_size = np.bincount(self.pool_of, minlength=len(self.names))
        self.rng = rng
        self.decay = float(decay)
        self.successes = np.zeros(len(self.names))
        self.episodes = np.zeros(len(self.names))

    def success_estimates(self) -> np.ndarray:
        """Return each pool's posterior mean success (Beta(1, 1) prior), in ``names`` order."""
        return (self.successes + 1.0) / (self.episodes + 2.0)

    def weights(self) -> np.ndarray:
        """Return each pool's learnability ``p (1 - p)``, in ``names`` order."""
        p = self.success_estimates()
        return p * (1.0 - p)

    def draw(self, count: int) -> list[int]:
        """Return ``count`` task indices (distinct unless there are fewer tasks than that)."""
        per_task = (self.weights() / self.pool_size)[self.pool_of]
        num_tasks = len(self.pool_of)
        tasks = self.rng.choice(
            num_tasks, size=count, replace=num_tasks < count, p=per_task / per_task.sum()
        )
        return [int(t) for t in tasks]

    def learnability_of(self, tasks: Sequence[int]) -> float:
        """Return the mean learnability of the pools of ``tasks`` (what a step drew)."""
        return float(np.mean(self.weights()[self.pool_of[list(tasks)]])) if tasks else 0.0

    def record(self, outcomes: Sequence[tuple[int, bool]]) -> None:
        """Fold one step's ``(task index, success)`` outcomes into the pools' counts."""
        self.successes *= self.decay
        self.episodes *= self.decay
        for task, success in outcomes:
            self.successes[self.pool_of[task]] += float(success)
            self.episodes[self.pool_of[task]] += 1.0

    def state_dict(self) -> dict[str, Any]:
        """Return the counts, by pool name (what a checkpoint keeps)."""
        return {
            "successes": dict(zip(self.names, self.successes.tolist(), strict=True)),
            "episodes": dict(zip(self.names, self.episodes.tolist(), strict=True)),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the counts of :meth:`state_dict` (pools it does not name start empty)."""
        for i, name in enumerate(self.names):
            self.successes[i] = state["successes"].get(name, 0.0)
            self.episodes[i] = state["episodes"].get(name, 0.0)


def task_pools(tasks: Sequence[Any], field: str | None) -> list[str]:
    """Return each task's pool: the value of its attribute ``field`` (``None``: the task's
    own index).

    Raises:
        ValueError: When the tasks have no such attribute (the message lists theirs).
    """
    if field is None:
        return [str(i) for i in range(len(tasks))]
    if tasks and not hasattr(tasks[0], field):
        names = sorted(getattr(tasks[0], "__dataclass_fields__", {}))
        raise ValueError(f"the tasks have no field {field!r}; theirs: {', '.join(names)}")
    return [str(getattr(task, field)) for task in tasks]
