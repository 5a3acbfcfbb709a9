"""Tests of boltzoo/lightningrl/credit.py: each rule's numbers, worked by hand."""

from __future__ import annotations

import pytest

from boltzoo.episode import Completion, Episode, Step
from boltzoo.lightningrl.credit import discounted, get_credit, identical, returns

# Rewards paid after each step (writer acts at steps 0 and 2, checker at 1 and 3; the terminal
# team reward 1.0 is paid to both agents after the last step):
#
#   step  agent    writer  checker
#   0     writer    0.5     0.0
#   1     checker   0.0     0.5
#   2     writer   -0.25    0.0
#   3     checker   1.0     1.0     <- terminal team reward
#
# R_writer  = 0.5 + 0 - 0.25 + 1.0 = 1.25
# R_checker = 0 + 0.5 + 0 + 1.0    = 1.5
REWARDS = [
    {"writer": 0.5, "checker": 0.0},
    {"writer": 0.0, "checker": 0.5},
    {"writer": -0.25, "checker": 0.0},
    {"writer": 1.0, "checker": 1.0},
]
AGENTS = ["writer", "checker", "writer", "checker"]


def two_agent_episode() -> Episode:
    steps = [
        Step(
            agent=agent,
            observation={"messages": [{"role": "user", "content": f"turn {t}"}]},
            action=Completion(text=f"a{t}", prompt_token_ids=[1, t], response_token_ids=[7 + t]),
            rewards=dict(rewards),
        )
        for t, (agent, rewards) in enumerate(zip(AGENTS, REWARDS, strict=True))
    ]
    return Episode(
        episode_id="ep-0",
        env_id="boltzoo/test-v0",
        task_id="task-0",
        task_index=0,
        agents=["writer", "checker"],
        steps=steps,
        final_rewards={"writer": 1.0, "checker": 1.0},
        terminated=True,
    )


def test_identical_gives_every_step_the_agents_episode_return():
    episode = two_agent_episode()
    # writer: R = 1.25 at both of its steps; checker: R = 1.5 at both.
    assert identical(episode, "writer", [0, 2]) == pytest.approx([1.25, 1.25])
    assert identical(episode, "checker", [1, 3]) == pytest.approx([1.5, 1.5])


def test_identical_counts_the_terminal_team_reward_once_per_agent():
    episode = two_agent_episode()
    # final_rewards repeats the last step's rewards; it must not be added a second time.
    assert identical(episode, "checker", [3]) == pytest.approx([1.5])


def test_discounted_scales_by_gamma_per_later_own_turn():
    episode = two_agent_episode()
    rule = discounted(0.5)
    # writer: step 0 has 1 own turn after it -> 1.25 * 0.5 = 0.625; step 2 has none -> 1.25.
    assert rule(episode, "writer", [0, 2]) == pytest.approx([0.625, 1.25])
    # checker: 1.5 * 0.5 = 0.75, then 1.5.
    assert rule(episode, "checker", [1, 3]) == pytest.approx([0.75, 1.5])


def test_discounted_counts_only_the_agents_own_turns():
    episode = two_agent_episode()
    # Three own turns (the other agent's turns between them do not count):
    # 1.25 * 0.5^2 = 0.3125, 1.25 * 0.5 = 0.625, 1.25.
    assert discounted(0.5)(episode, "writer", [0, 1, 2]) == pytest.approx([0.3125, 0.625, 1.25])


def test_discounted_with_gamma_one_is_identical():
    episode = two_agent_episode()
    assert discounted(1.0)(episode, "writer", [0, 2]) == identical(episode, "writer", [0, 2])


def test_returns_sums_rewards_from_the_step_to_the_end():
    episode = two_agent_episode()
    # writer paid [0.5, 0, -0.25, 1.0]: from step 0: 0.5 + 0 - 0.25 + 1 = 1.25;
    #                                    from step 2: -0.25 + 1 = 0.75.
    assert returns(episode, "writer", [0, 2]) == pytest.approx([1.25, 0.75])
    # checker paid [0, 0.5, 0, 1.0]: from step 1: 0.5 + 0 + 1 = 1.5; from step 3: 1.0.
    assert returns(episode, "checker", [1, 3]) == pytest.approx([1.5, 1.0])


def test_an_agent_never_paid_gets_zero():
    episode = two_agent_episode()
    assert identical(episode, "judge", [0]) == [0.0]
    assert returns(episode, "judge", [0]) == [0.0]


def test_get_credit_maps_names_and_passes_callables_through():
    episode = two_agent_episode()
    assert get_credit("identical") is identical
    assert get_credit("returns") is returns
    assert get_credit("discounted", gamma=0.5)(episode, "writer", [0, 2]) == pytest.approx(
        [0.625, 1.25]
    )

    def halves(episode, agent, steps):
        return [0.5 for _ in steps]

    assert get_credit(halves) is halves


def test_get_credit_unknown_name_lists_the_choices():
    with pytest.raises(ValueError, match="identical.*discounted.*returns"):
        get_credit("monte_carlo")


def test_discounted_rejects_gamma_outside_unit_interval():
    with pytest.raises(ValueError, match="gamma"):
        discounted(1.5)
