"""tokens-v0: the PettingZoo contract, the token-set reward, scripted policies, the registry."""

from __future__ import annotations

import numpy as np
import pettingzoo
import pytest
from pettingzoo.test import api_test

import boltzoo
from boltzoo.agents import NaivePolicy, OraclePolicy
from boltzoo.envs.tokens_v0 import NO_TOKEN_IDS_NOTE, TokenTask
from boltzoo.episode import Completion
from boltzoo.errors import DatasetError


def play_one(env, action, task_index=0):
    """Reset ``env``, step ``action`` for the writer; return the raw env."""
    env.reset(seed=0, options={"task_index": task_index})
    for _agent in env.agent_iter():
        _, _, term, trunc, _ = env.last()
        env.step(None if term or trunc else action)
    return env.unwrapped


def mixed_completion(target, vocab_size, hits, total):
    """Return a Completion of ``hits`` target ids and ``total - hits`` ids outside the set."""
    inside = sorted(target)[:hits]
    outside = [i for i in range(vocab_size) if i not in target][: total - hits]
    return Completion(text="x", response_token_ids=outside[:1] + inside + outside[1:])


def test_pettingzoo_api_test_passes():
    api_test(boltzoo.make("boltzoo/tokens-v0", vocab_size=1000), num_cycles=200)


def test_observation_is_a_system_line_and_the_prompt():
    env = boltzoo.make("tokens-v0", vocab_size=1000, num_tasks=5)
    raw = env.unwrapped
    assert raw.possible_agents == ["writer"]
    assert raw.num_tasks == 5
    assert all(isinstance(t, TokenTask) for t in raw.tasks)
    env.reset(seed=0, options={"task_index": 3})
    obs = env.observe("writer")
    assert [m["role"] for m in obs["messages"]] == ["system", "user"]
    assert "\n" not in obs["messages"][0]["content"]
    assert obs["messages"][1]["content"] == raw.tasks[3].prompt
    assert obs["task_id"] == raw.tasks[3].task_id


@pytest.mark.parametrize(("policy", "score"), [(OraclePolicy(), 1.0), (NaivePolicy(), 0.0)])
def test_scripted_policies_score_one_and_zero(policy, score):
    episodes = boltzoo.rollout(
        "tokens-v0", {"writer": policy}, tasks=range(8), vocab_size=1000, progress=False
    )
    assert len(episodes) == 8
    assert not [e.error for e in episodes if e.failed]
    assert all(e.terminated and e.score == score for e in episodes)
    assert all(e.success is (score == 1.0) for e in episodes)
    assert all(e.returns() == {"writer": score} for e in episodes)
    assert all(len(e.steps) == 1 for e in episodes)


@pytest.mark.parametrize(("hits", "score", "success"), [(3, 0.75, True), (1, 0.25, False)])
def test_reward_is_the_fraction_of_tokens_in_the_target_set(hits, score, success):
    env = boltzoo.make("tokens-v0", vocab_size=1000, target_size=50)
    target = env.unwrapped.target_token_ids
    raw = play_one(env, mixed_completion(target, 1000, hits, 4))
    info = raw.episode.steps[0].info
    assert info["score"] == info["target_fraction"] == score
    assert info["success"] is success
    assert info["response_tokens"] == 4
    assert info["target_hits"] == hits
    assert "note" not in info
    assert raw.episode.score == score and raw.episode.success is success
    assert raw.episode.returns() == {"writer": score}


def test_success_threshold_is_one_half():
    env = boltzoo.make("tokens-v0", vocab_size=1000, target_size=50)
    target = env.unwrapped.target_token_ids
    raw = play_one(env, mixed_completion(target, 1000, 2, 4))
    assert raw.episode.steps[0].info["score"] == 0.5
    assert raw.episode.steps[0].info["success"] is True


@pytest.mark.parametrize(
    "action",
    ["some text", Completion(text="some text"), Completion(text="", response_token_ids=None)],
)
def test_an_action_without_token_ids_scores_zero_with_a_note(action):
    raw = play_one(boltzoo.make("tokens-v0", vocab_size=1000), action)
    info = raw.episode.steps[0].info
    assert info["score"] == 0.0 and info["success"] is False
    assert info["response_tokens"] == 0
    assert info["note"] == NO_TOKEN_IDS_NOTE
    assert raw.episode.terminated and raw.episode.returns() == {"writer": 0.0}


def test_an_empty_response_scores_zero():
    raw = play_one(
        boltzoo.make("tokens-v0", vocab_size=1000), Completion(text="", response_token_ids=[])
    )
    assert raw.episode.steps[0].info["score"] == 0.0
    assert raw.episode.steps[0].info["response_tokens"] == 0
    assert "note" not in raw.episode.steps[0].info


def test_the_episode_ends_after_one_turn_whatever_max_turns():
    env = boltzoo.make("tokens-v0", vocab_size=1000, max_turns=5)
    raw = play_one(env, "hello")
    assert raw.turn_count == 1 and raw.episode.terminated and not raw.episode.truncated


def test_target_set_is_deterministic_for_a_seed():
    def target(**kwargs):
        return boltzoo.make("tokens-v0", vocab_size=1000, **kwargs).unwrapped.target_token_ids

    first = target(target_size=300, target_seed=7)
    assert isinstance(first, frozenset)
    assert len(first) == 300 and all(isinstance(i, int) and 0 <= i < 1000 for i in first)
    assert first == target(target_size=300, target_seed=7)
    assert first != target(target_size=300, target_seed=8)
    expected = np.random.default_rng(7).choice(1000, size=300, replace=False)
    assert first == frozenset(int(i) for i in expected)


def test_bad_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="target_size"):
        boltzoo.make("tokens-v0", vocab_size=10, target_size=11)
    with pytest.raises(ValueError, match="target_size"):
        boltzoo.make("tokens-v0", vocab_size=10, target_size=0)
    with pytest.raises(ValueError, match="vocab_size"):
        boltzoo.make("tokens-v0", vocab_size=0)
    with pytest.raises(ValueError, match="num_tasks"):
        boltzoo.make("tokens-v0", vocab_size=10, target_size=5, num_tasks=0)
    with pytest.raises(DatasetError, match="split"):
        boltzoo.make("tokens-v0", vocab_size=10, target_size=5, split="dev")
    assert (
        boltzoo.make("tokens-v0", vocab_size=10, target_size=5, split="test").unwrapped.num_tasks
        == 64
    )


def test_naive_action_when_every_id_is_a_target():
    env = boltzoo.make("tokens-v0", vocab_size=5, target_size=5)
    env.reset(seed=0)
    assert env.unwrapped.naive_action("writer").response_token_ids == []
    assert play_one(env, env.unwrapped.oracle_action("writer")).episode.score == 1.0


def test_registries_make_the_env():
    assert "boltzoo/tokens-v0" in boltzoo.registered_envs()
    assert "boltzoo/tokens-v0" in pettingzoo.aec_registry
    made = boltzoo.make("boltzoo/tokens-v0", vocab_size=1000)
    assert type(made.unwrapped).__name__ == "raw_env"
    assert made.unwrapped.vocab_size == 1000
    env = pettingzoo.make("aec", "boltzoo/tokens-v0", vocab_size=1000)
    assert type(env.unwrapped) is type(made.unwrapped)
    assert env.unwrapped.target_token_ids == made.unwrapped.target_token_ids


def test_single_agent_view_scores_a_completion():
    gym_env = boltzoo.make_gym("boltzoo/tokens-v0", vocab_size=1000)
    gym_env.reset(seed=0)
    raw = gym_env.aec_env.unwrapped
    _, reward, terminated, _, info = gym_env.step(raw.oracle_action("writer"))
    assert reward == 1.0 and terminated and info["score"] == 1.0


def test_random_sampling_of_a_tiny_model_reaches_the_base_rate(tiny_policy, smollm2_tokenizer):
    vocab_size = len(smollm2_tokenizer)
    target_size = 3000
    policy = tiny_policy(seed=0, max_new_tokens=16)
    episodes = boltzoo.rollout(
        "tokens-v0",
        {"writer": policy},
        episodes=16,
        vocab_size=vocab_size,
        target_size=target_size,
        progress=False,
    )
    assert not [e.error for e in episodes if e.failed]
    assert all(e.steps[0].info["response_tokens"] > 0 for e in episodes)
    assert all("note" not in e.steps[0].info for e in episodes)
    mean = sum(e.score for e in episodes) / len(episodes)
    # The base rate is target_size / vocab_size (about 0.061).
    assert 0.02 < mean < 0.15, mean
