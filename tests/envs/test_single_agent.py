"""The single-agent Gymnasium view of any agent, and its registration with Gymnasium."""

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env

import boltzoo
from boltzoo.agents import OraclePolicy


@pytest.mark.parametrize(
    "kwargs",
    [
        {"agent": "solver"},
        {
            "agent": "solver",
            "agents": ("solver", "verifier"),
            "policies": {"verifier": OraclePolicy()},
        },
        {
            "agent": "verifier",
            "agents": ("solver", "verifier"),
            "policies": {"solver": OraclePolicy()},
        },
    ],
    ids=["solver", "solver-with-verifier", "verifier"],
)
def test_gymnasium_check_env_passes_through_the_registry(kwargs):
    env = gymnasium.make("boltzoo/math-v0", **kwargs)
    check_env(env.unwrapped)


def test_make_gym_without_agent_picks_the_only_one():
    env = boltzoo.make_gym("math-v0")
    obs, info = env.reset(seed=0)
    assert obs["agent"] == "solver"
    gold = env.unwrapped.aec_env.unwrapped.current_task.answer
    obs, reward, terminated, truncated, info = env.step(f"\\boxed{{{gold}}}")
    assert (reward, terminated, truncated, info["success"]) == (1.0, True, False, True)


def test_verifier_view_gets_the_team_reward_after_the_solver_acts():
    env = boltzoo.make_gym(
        "math-v0",
        agent="verifier",
        agents=("solver", "verifier"),
        policies={"solver": OraclePolicy()},
    )
    obs, _ = env.reset(seed=1)
    assert obs["agent"] == "verifier" and "Proposed answer" in obs["messages"][-1]["content"]
    _, reward, terminated, _, info = env.step("VERDICT: CORRECT")
    assert terminated and reward == 1.0 and info["success"] is True


def test_rejecting_verifier_sees_the_episode_end_after_the_solver_answers_again():
    solver_answers = iter(["\\boxed{-5}", "\\boxed{-6}"])
    env = boltzoo.make_gym(
        "math-v0",
        agent="verifier",
        agents=("solver", "verifier"),
        policies={"solver": lambda obs: next(solver_answers)},
    )
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step("VERDICT: INCORRECT - negative")
    assert terminated and reward == 0.0 and info["success"] is False


def test_view_needs_policies_for_the_other_agents():
    with pytest.raises(ValueError, match="verifier"):
        boltzoo.make_gym("math-v0", agent="solver", agents=("solver", "verifier"))
    with pytest.raises(ValueError, match="agent="):
        boltzoo.make_gym("math-v0", agents=("solver", "verifier"))
