"""Tests of boltzoo/lightningrl/advantages.py: the estimators' numbers, worked by hand."""

from __future__ import annotations

import math
import warnings

import pytest
import torch

from boltzoo.lightningrl.advantages import (
    GroupStats,
    compute_advantages,
    group_keys,
    grpo,
    reinforce_pp,
    rloo,
)
from boltzoo.lightningrl.transitions import Transition


def transition(task="t", agent="writer", turn=0, reward=0.0, episode="e", call=0) -> Transition:
    return Transition(
        agent=agent,
        task_id=task,
        task_index=0,
        episode_id=episode,
        group=0,
        turn=turn,
        call=call,
        prompt_token_ids=[1],
        response_token_ids=[2],
        logprobs=None,
        reward=reward,
    )


def test_grpo_by_hand():
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0])
    keys = [("a",), ("a",), ("a",), ("a",), ("b",)]
    # group a: mean 0.5; std with Bessel: sqrt((4 * 0.25) / 3) = sqrt(1/3) = 0.57735
    # A = +-0.5 / (0.57735 + 1e-6) = +-0.866024; group b has one member -> 0.
    s = math.sqrt(1 / 3) + 1e-6
    expected = [0.5 / s, -0.5 / s, -0.5 / s, 0.5 / s, 0.0]
    assert grpo(rewards, keys).tolist() == pytest.approx(expected, rel=1e-6)
    assert expected[0] == pytest.approx(0.866024, rel=1e-6)


def test_grpo_without_std_only_subtracts_the_group_mean():
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0])
    keys = [("a",), ("a",), ("a",), ("a",), ("b",)]
    # A = r - 0.5 in group a; the singleton b -> 0.
    assert grpo(rewards, keys, normalize_std=False).tolist() == [0.5, -0.5, -0.5, 0.5, 0.0]


def test_grpo_group_of_equal_rewards_gives_zero():
    assert grpo(torch.tensor([1.0, 1.0, 1.0]), [("a",)] * 3).tolist() == [0.0, 0.0, 0.0]


def test_rloo_by_hand():
    rewards = torch.tensor([1.0, 0.0, 0.0, 2.0])
    keys = [("a",), ("a",), ("a",), ("b",)]
    # group a: A_i = r_i - mean of the others: 1 - (0 + 0)/2 = 1; 0 - (1 + 0)/2 = -0.5 (twice)
    # (= 3/2 * (r - 1/3)); group b is a singleton -> 0.
    assert rloo(rewards, keys).tolist() == pytest.approx([1.0, -0.5, -0.5, 0.0])


def test_reinforce_pp_normalises_over_the_batch():
    rewards = torch.tensor([1.0, 2.0, 3.0, 4.0])
    # mean 2.5; std with Bessel: sqrt((2.25 + 0.25 + 0.25 + 2.25) / 3) = sqrt(5/3) = 1.290994
    s = math.sqrt(5 / 3) + 1e-6
    expected = [-1.5 / s, -0.5 / s, 0.5 / s, 1.5 / s]
    assert reinforce_pp(rewards).tolist() == pytest.approx(expected, rel=1e-6)
    assert expected[0] == pytest.approx(-1.161894, rel=1e-6)
    assert reinforce_pp(torch.tensor([3.0])).tolist() == [0.0]


def test_integer_rewards_are_accepted():
    assert grpo(torch.tensor([1, 0]), [("a",), ("a",)], normalize_std=False).tolist() == [
        0.5,
        -0.5,
    ]


BATCH = [
    # task, agent, turn, reward
    ("t1", "writer", 0, 1.0),
    ("t1", "writer", 2, 0.0),
    ("t1", "checker", 1, 3.0),
    ("t1", "writer", 0, 0.0),
    ("t1", "writer", 2, 0.0),
    ("t1", "checker", 1, 1.0),
]


def batch() -> list[Transition]:
    return [transition(task, agent, turn, reward) for task, agent, turn, reward in BATCH]


def test_group_keys():
    ts = batch()[:3]
    assert group_keys(ts, "task") == [("t1",)] * 3
    assert group_keys(ts, "task_agent") == [("t1", "writer"), ("t1", "writer"), ("t1", "checker")]
    assert group_keys(ts, "task_agent_turn") == [
        ("t1", "writer", 0),
        ("t1", "writer", 2),
        ("t1", "checker", 1),
    ]
    with pytest.raises(ValueError, match="task_agent_turn"):
        group_keys(ts, "episode")


def advantages(ts: list[Transition]) -> list[float]:
    return [t.advantage for t in ts]


def test_group_by_changes_the_groups():
    # rewards [1, 0, 3, 0, 0, 1] (writer t0, writer t2, checker t1, twice over);
    # RLOO: A = G / (G - 1) * (r - mean).
    # task: one group of 6, mean 5/6 -> 6/5 * (r - 5/6) = [0.2, -1, 2.6, -1, -1, 0.2]
    ts = batch()
    stats = compute_advantages(ts, "rloo", "task")
    assert advantages(ts) == pytest.approx([0.2, -1.0, 2.6, -1.0, -1.0, 0.2])
    assert stats == GroupStats(groups=1, mean_size=6.0, min_size=6, max_size=6, singletons=0)
    # task_agent: writer [1, 0, 0, 0] mean 1/4 -> 4/3 * (r - 1/4) = [1, -1/3, -1/3, -1/3];
    #             checker [3, 1] mean 2 -> 2 * (r - 2) = [2, -2]
    ts = batch()
    stats = compute_advantages(ts, "rloo", "task_agent")
    assert advantages(ts) == pytest.approx([1.0, -1 / 3, 2.0, -1 / 3, -1 / 3, -2.0])
    assert stats == GroupStats(groups=2, mean_size=3.0, min_size=2, max_size=4, singletons=0)
    # task_agent_turn: writer t0 [1, 0] -> [1, -1]; writer t2 [0, 0] -> [0, 0];
    #                  checker t1 [3, 1] -> [2, -2]
    ts = batch()
    stats = compute_advantages(ts, "rloo", "task_agent_turn")
    assert advantages(ts) == pytest.approx([1.0, 0.0, 2.0, -1.0, 0.0, -2.0])
    # writer t2's rewards are equal: a group that teaches nothing
    assert stats == GroupStats(
        groups=3, mean_size=2.0, min_size=2, max_size=2, singletons=0, zero_std=1
    )


def test_singleton_groups_get_zero_and_a_warning():
    ts = [transition("t1", reward=1.0), transition("t1", reward=0.0), transition("t2", reward=1.0)]
    with pytest.warns(UserWarning, match="1 of 2 advantage groups have a single member"):
        stats = compute_advantages(ts, "grpo", "task", normalize_std=False)
    # t1: [1, 0] - 0.5 = [0.5, -0.5]; t2 alone -> 0.
    assert advantages(ts) == [0.5, -0.5, 0.0]
    assert stats == GroupStats(groups=2, mean_size=1.5, min_size=1, max_size=2, singletons=1)


def test_groups_of_equal_rewards_are_counted_but_not_singletons():
    rewards = {"all-right": [1, 1, 1], "all-wrong": [0, 0, 0], "mixed": [1, 0, 0], "alone": [1]}
    ts = [transition(task, reward=r) for task, values in rewards.items() for r in values]
    with pytest.warns(UserWarning, match="1 of 4"):
        stats = compute_advantages(ts, "grpo", "task")
    assert stats.zero_std == 2 and stats.singletons == 1
    # every member of an equal-reward group gets advantage 0: nothing is learnt from it
    assert advantages(ts)[:6] == [0.0] * 6 and advantages(ts)[6] > 0


def test_no_warning_without_singletons_or_for_reinforce_pp():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compute_advantages(batch(), "grpo", "task")
        ts = [transition("t1", reward=1.0), transition("t2", reward=3.0)]
        stats = compute_advantages(ts, "reinforce++", "task")
    # batch mean 2, std sqrt(2): A = +-1 / (sqrt(2) + 1e-6)
    assert advantages(ts) == pytest.approx([-1 / math.sqrt(2), 1 / math.sqrt(2)], rel=1e-5)
    assert stats.singletons == 2


def test_compute_advantages_grpo_matches_grpo():
    ts = batch()
    compute_advantages(ts, "grpo", "task_agent")
    rewards = torch.tensor([r for *_, r in BATCH])
    expected = grpo(rewards, group_keys(ts, "task_agent"))
    assert advantages(ts) == pytest.approx(expected.tolist(), rel=1e-6)


def test_per_episode_copies_one_value_to_all_calls_of_an_agent_in_an_episode():
    ts = [
        # episode e1: writer calls credited 1, 0 and 0, checker 2
        transition("t1", "writer", 0, 1.0, episode="e1"),
        transition("t1", "writer", 0, 0.0, episode="e1", call=1),
        transition("t1", "checker", 1, 2.0, episode="e1"),
        transition("t1", "writer", 2, 0.0, episode="e1"),
        # episode e2: writer calls 0 and 0, checker 0
        transition("t1", "writer", 0, 0.0, episode="e2"),
        transition("t1", "checker", 1, 0.0, episode="e2"),
        transition("t1", "writer", 2, 0.0, episode="e2"),
    ]
    # writer values: e1 mean(1, 0, 0) = 1/3, e2 mean(0, 0) = 0 -> RLOO 2 * (r - 1/6) = +-1/3
    # checker values: e1 2, e2 0 -> 2 * (r - 1) = +-2
    # task_agent_turn drops the turn here (acts as task_agent).
    stats = compute_advantages(ts, "rloo", "task_agent_turn", per_episode=True)
    assert advantages(ts) == pytest.approx([1 / 3, 1 / 3, 2.0, 1 / 3, -1 / 3, -2.0, -1 / 3])
    assert stats == GroupStats(groups=2, mean_size=2.0, min_size=2, max_size=2, singletons=0)


def test_per_episode_grouped_by_task_compares_all_agents_together():
    ts = [
        transition("t1", "writer", 0, 1.0, episode="e1"),
        transition("t1", "writer", 2, 0.0, episode="e1"),
        transition("t1", "checker", 1, 3.0, episode="e1"),
        transition("t1", "writer", 0, 0.0, episode="e2"),
    ]
    # (e1, writer) 0.5, (e1, checker) 3, (e2, writer) 0; one group, mean 3.5/3 = 7/6
    # no std: r - 7/6 = [-2/3, 11/6, -7/6]
    compute_advantages(ts, "grpo", "task", normalize_std=False, per_episode=True)
    assert advantages(ts) == pytest.approx([-2 / 3, -2 / 3, 11 / 6, -7 / 6])


def test_unknown_estimator_or_group_by_lists_the_choices():
    with pytest.raises(ValueError, match=r"grpo.*rloo.*reinforce\+\+"):
        compute_advantages(batch(), "ppo")
    with pytest.raises(ValueError, match="task.*task_agent.*task_agent_turn"):
        compute_advantages(batch(), "grpo", "agent")


def test_empty_batch_gives_empty_stats():
    assert compute_advantages([]) == GroupStats(0, 0.0, 0, 0, 0)
