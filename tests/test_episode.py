"""Completion and Episode records: validation and a lossless JSON round trip."""

import json

import pytest

import boltzoo
from boltzoo.episode import Completion, Episode


def test_episode_round_trips_through_json_unchanged():
    env = boltzoo.make("math-v0", agents=("solver", "verifier"))
    env.reset(seed=3)
    inner = Completion(text="inner", prompt_token_ids=[9], response_token_ids=[8], logprobs=[-1.0])
    actions = [
        Completion(
            text="<calc>2+2</calc>",
            prompt_token_ids=[1, 2, 3],
            response_token_ids=[4, 5],
            logprobs=[-0.25, -1.5],
            sampling_params={"temperature": 0.7, "top_p": 0.9},
            model="tiny",
            policy_version=3,
            inner_calls=[inner],
        ),
        "\\boxed{4} ünïcödé 😀",
        "VERDICT: CORRECT",
    ]
    for _agent in env.agent_iter():
        _, _, term, trunc, _ = env.last()
        env.step(None if term or trunc else actions.pop(0))
    episode = env.unwrapped.episode
    restored = Episode.from_dict(json.loads(json.dumps(episode.to_dict())))
    assert restored == episode
    assert restored.steps[0].action.response_token_ids == [4, 5]
    assert restored.steps[0].action.inner_calls[0].logprobs == [-1.0]


def test_logprobs_must_pair_with_response_tokens():
    with pytest.raises(ValueError, match="one to one"):
        Completion(text="x", response_token_ids=[1, 2], logprobs=[-0.1])


def test_completion_text_must_be_a_string():
    with pytest.raises(TypeError):
        Completion(text=None)  # type: ignore[arg-type]


def test_rollout_episodes_with_real_tokens_survive_save_and_load(tmp_path, tiny_policy):
    from boltzoo.agents import OraclePolicy

    policy = tiny_policy(max_new_tokens=8)
    episodes = boltzoo.rollout(
        "math-v0",
        {"solver": policy, "verifier": OraclePolicy()},
        episodes=6,
        agents=("solver", "verifier"),
        max_turns=3,
        progress=False,
    )
    path = boltzoo.save_episodes(tmp_path / "runs" / "episodes.jsonl", episodes)
    restored = boltzoo.load_episodes(path)
    assert restored == episodes
    first = restored[0].steps[0].action
    assert first.response_token_ids == episodes[0].steps[0].action.response_token_ids
    assert isinstance(first.logprobs[0], float)
    assert not list(path.parent.glob(".*.tmp"))  # written by rename, no leftovers


def test_loading_a_file_that_is_not_episodes_is_a_clear_error(tmp_path):
    from boltzoo.errors import DatasetError

    path = tmp_path / "bad.jsonl"
    path.write_text('{"not": "an episode"}\n')
    with pytest.raises(DatasetError, match="line 1"):
        boltzoo.load_episodes(path)
