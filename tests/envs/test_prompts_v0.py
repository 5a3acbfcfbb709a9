"""prompts-v0: prompts as rows, judged by the reward the agent reports."""

from __future__ import annotations

import json
import math

import pytest
from pettingzoo.test import api_test

import boltzoo
from boltzoo.envs.prompts_v0 import EXAMPLE_TASKS
from boltzoo.errors import AgentRewardError, DatasetError

ROWS = [{"id": "a", "prompt": "Say hi."}, {"prompt": "Say bye.", "system": "Be terse."}]


def played(env, reward=None, calls=(), answer="hi"):
    """Play one turn of ``env`` (reset on task 0) after reporting ``reward`` and ``calls``."""
    env.reset(options={"task_index": 0})
    if reward is not None:
        env.unwrapped.report_reward("agent", reward)
    for call_id, value in calls:
        env.unwrapped.report_reward("agent", value, call_id=call_id)
    env.step(answer)
    return env.unwrapped


def test_the_api_and_the_bundled_examples():
    api_test(boltzoo.make("prompts-v0"), num_cycles=3)
    env = boltzoo.make("prompts-v0").unwrapped
    rows = [json.loads(line) for line in open(EXAMPLE_TASKS)]
    assert [t.task_id for t in env.tasks] == [r["id"] for r in rows]
    assert all("tests" in t.row for t in env.tasks)  # kept for the agent, never shown
    env.reset(options={"task_index": 0})
    assert "tests" not in json.dumps(env.observe("agent")) and "assert" not in json.dumps(
        env.observe("agent")
    )


def test_rows_from_a_list_a_file_or_splits(tmp_path):
    env = boltzoo.make("prompts-v0", tasks=ROWS).unwrapped
    assert [t.task_id for t in env.tasks] == ["a", "1"]
    env.reset(options={"task_index": 1})
    assert env.observe("agent")["messages"] == [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": "Say bye."},
    ]
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in ROWS) + "\n")
    assert boltzoo.make("prompts-v0", tasks=str(path)).unwrapped.num_tasks == 2
    both = {"train": ROWS, "test": ROWS[:1]}
    assert boltzoo.make("prompts-v0", tasks=both, split="test").unwrapped.num_tasks == 1
    with pytest.raises(DatasetError, match="no split 'dev'"):
        boltzoo.make("prompts-v0", tasks=both, split="dev")
    # one file is the train split only: an evaluation on "test" never plays the training rows
    with pytest.raises(DatasetError, match="'train' split only"):
        boltzoo.make("prompts-v0", tasks=str(path), split="test")


@pytest.mark.parametrize(
    "rows, words",
    [
        ([{"id": "x", "prompt": "a"}, {"id": "x", "prompt": "b"}], "used twice"),
        ([{"text": "no prompt"}], "prompt"),
        (["just a string"], "JSON object"),
        ([{"prompt": "p", "system": 3}], "'system' must be text"),
        ([], "holds no tasks"),
        (42, "expected a JSONL file, a JSON-list file or a list of rows"),
    ],
)
def test_bad_rows_are_clear_errors(rows, words):
    with pytest.raises(DatasetError, match=words):
        boltzoo.make("prompts-v0", tasks=rows)


def test_the_reported_reward_is_the_team_reward_and_scores_the_episode():
    env = played(boltzoo.make("prompts-v0", tasks=ROWS, success_at=0.5), reward=0.75)
    assert env.episode.final_rewards == {"agent": 0.75}
    assert env.episode.score == 0.75 and env.episode.success
    env = played(boltzoo.make("prompts-v0", tasks=ROWS), reward=3.0)  # any finite number
    assert env.episode.returns() == {"agent": 3.0} and env.episode.score == 1.0
    env = played(boltzoo.make("prompts-v0", tasks=ROWS), reward=-1.0)
    assert env.episode.score == 0.0 and not env.episode.success


def test_call_rewards_are_paid_with_the_turn_and_change_no_score():
    env = played(
        boltzoo.make("prompts-v0", tasks=ROWS), reward=0.0, calls=[("c1", 0.25), ("c2", 0.5)]
    )
    assert env.episode.returns() == {"agent": 0.75} and env.episode.score == 0.0
    assert env.infos["agent"]["reported_rewards"] == {
        "turn": 0.0,
        "calls": {"c1": 0.25, "c2": 0.5},
    }


def test_rewards_must_be_finite_numbers_reported_once_per_turn_or_call():
    env = boltzoo.make("prompts-v0", tasks=ROWS)
    env.reset(options={"task_index": 0})
    for bad in (math.nan, math.inf, "1", None, True):
        with pytest.raises(AgentRewardError, match="finite number"):
            env.unwrapped.report_reward("agent", bad)
    env.unwrapped.report_reward("agent", 1.0)
    with pytest.raises(AgentRewardError, match="already"):
        env.unwrapped.report_reward("agent", 0.0)
    env.unwrapped.report_reward("agent", 0.5, call_id="c")
    with pytest.raises(AgentRewardError, match="already"):
        env.unwrapped.report_reward("agent", 0.5, call_id="c")


def test_a_turn_without_a_reported_reward_fails_its_episode_and_scores_nothing():
    env = played(boltzoo.make("prompts-v0", tasks=ROWS))
    assert env.episode.failed and "reported no reward" in env.episode.error
    assert env.episode.score is None and env.episode.done
    assert env.infos["agent"]["success"] is False


@pytest.mark.parametrize("env_id", ["math-v0", "sql-v0", "tokens-v0"])
def test_envs_that_judge_their_own_tasks_take_no_reward_from_agents(env_id):
    env = boltzoo.make(env_id)
    env.reset(seed=0)
    with pytest.raises(AgentRewardError, match="judges its own tasks"):
        env.unwrapped.report_reward(env.agent_selection, 1.0)
