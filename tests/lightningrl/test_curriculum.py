"""Learnability task sampling: draws follow each pool's reward variance, and survive a resume."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import pytest

from boltzoo.lightningrl.curriculum import LearnabilitySampler, task_pools


def sampler_over(pools: dict[str, int], seed: int = 0, decay: float = 1.0) -> LearnabilitySampler:
    names = [name for name, size in pools.items() for _ in range(size)]
    return LearnabilitySampler(names, np.random.default_rng(seed), decay=decay)


def pool_counts(sampler: LearnabilitySampler, draws: int) -> Counter:
    return Counter(sampler.names[sampler.pool_of[t]] for t in sampler.draw(draws))


def test_draws_favour_the_pool_whose_outcomes_are_mixed():
    # "solved" always succeeds, "hopeless" never, "mixed" half the time; the mixed pool is
    # the smallest, so uniform draws would give it the fewest tasks
    sampler = sampler_over({"solved": 40, "hopeless": 40, "mixed": 20})
    task_of = {
        name: int(np.flatnonzero(sampler.pool_of == i)[0]) for i, name in enumerate(sampler.names)
    }
    for step in range(10):
        sampler.record(
            [(task_of["solved"], True)] * 4
            + [(task_of["hopeless"], False)] * 4
            + [(task_of["mixed"], step % 2 == 0), (task_of["mixed"], step % 2 == 1)] * 2
        )
    p = dict(zip(sampler.names, sampler.success_estimates(), strict=True))
    assert p["solved"] > 0.95 and p["hopeless"] < 0.05 and p["mixed"] == pytest.approx(0.5)
    counts = sum((pool_counts(sampler, 8) for _ in range(50)), Counter())
    assert counts["mixed"] > 0.7 * 400  # against a fifth if drawn uniformly
    assert counts["solved"] < 0.15 * 400 and counts["hopeless"] < 0.15 * 400
    assert sampler.learnability_of([task_of["mixed"]]) == pytest.approx(0.25)


def test_a_pool_never_tried_weighs_most_so_every_pool_is_tried():
    sampler = sampler_over({"tried": 50, "new": 50})
    tried = int(np.flatnonzero(sampler.pool_of == sampler.names.index("tried"))[0])
    sampler.record([(tried, True)] * 3 + [(tried, False)])  # p = 4/6: weight 0.22 < 0.25
    weights = dict(zip(sampler.names, sampler.weights(), strict=True))
    assert weights["new"] == pytest.approx(0.25) and weights["new"] > weights["tried"]


def test_old_outcomes_decay_so_the_estimate_follows_the_policy():
    sampler = sampler_over({"a": 4}, decay=0.5)
    sampler.record([(0, False)] * 8)
    for _ in range(6):  # the policy now solves the pool
        sampler.record([(0, True)] * 8)
    assert sampler.success_estimates()[0] > 0.9
    assert sampler.episodes[0] == pytest.approx(8 * (1 - 0.5**7) / (1 - 0.5))


def test_draws_are_distinct_within_a_step_and_state_round_trips():
    sampler = sampler_over({"a": 3, "b": 5}, seed=1)
    assert sorted(sampler.draw(8)) == list(range(8))
    sampler.record([(0, True), (4, False), (5, True)])
    other = sampler_over({"a": 3, "b": 5, "c": 2}, seed=1)
    other.load_state_dict(sampler.state_dict())
    assert other.state_dict()["episodes"] == sampler.state_dict()["episodes"] | {"c": 0.0}


def test_pools_come_from_a_field_of_the_tasks_or_the_tasks_themselves():
    @dataclass
    class Task:
        task_id: str
        template: str

    tasks = [Task("t0", "x"), Task("t1", "y"), Task("t2", "x")]
    assert task_pools(tasks, "template") == ["x", "y", "x"]
    assert task_pools(tasks, None) == ["0", "1", "2"]
    with pytest.raises(ValueError, match="no field 'level'; theirs: task_id, template"):
        task_pools(tasks, "level")
    with pytest.raises(ValueError, match="decay"):
        LearnabilitySampler(["x"], np.random.default_rng(0), decay=0.0)
