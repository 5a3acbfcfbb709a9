"""The scripted backend: replayed texts with real token ids, reaching protocol paths."""

from __future__ import annotations

import pytest

import boltzoo
from boltzoo.agents import ScriptedPolicy


def test_replayed_texts_come_with_real_token_ids(smollm2_tokenizer):
    policy = ScriptedPolicy(["First <calc>6*7</calc>", "So \\boxed{42}"], smollm2_tokenizer)
    env = boltzoo.make("math-v0")
    env.reset(options={"task_index": 0})
    from boltzoo.agents import Turn

    [completion] = policy.act([Turn("solver", env.observe("solver"), env.unwrapped)])
    assert completion.text == "First <calc>6*7</calc>"
    assert smollm2_tokenizer.decode(completion.response_token_ids, skip_special_tokens=True) == (
        completion.text
    )
    assert completion.response_token_ids[-1] == smollm2_tokenizer.eos_token_id
    assert completion.prompt_token_ids == list(
        smollm2_tokenizer.apply_chat_template(
            env.observe("solver")["messages"],
            add_generation_prompt=True,
            tokenize=True,
            return_dict=False,
        )
    )
    assert completion.logprobs is None


def test_function_of_the_turn_drives_a_whole_team(smollm2_tokenizer):
    def solver(turn):
        gold = turn.env.current_task.answer
        return (
            "<calc>1+1</calc>" if len(turn.observation["messages"]) == 2 else f"\\boxed{{{gold}}}"
        )

    episodes = boltzoo.rollout(
        "math-v0",
        {
            "solver": ScriptedPolicy(solver, smollm2_tokenizer),
            "verifier": ScriptedPolicy(lambda turn: "VERDICT: CORRECT", smollm2_tokenizer),
        },
        episodes=4,
        agents=("solver", "verifier"),
        progress=False,
    )
    for episode in episodes:
        assert [s.agent for s in episode.steps] == ["solver", "solver", "verifier"]
        assert episode.success and all(s.action.has_tokens for s in episode.steps)


def test_running_out_of_responses_fails_the_episode_not_the_rollout():
    episodes = boltzoo.rollout(
        "math-v0", {"solver": ScriptedPolicy(["thinking..."])}, episodes=1, progress=False
    )
    assert episodes[0].failed and "ran out" in episodes[0].error


def test_without_a_tokenizer_only_text_is_replayed():
    from boltzoo.agents import Turn

    [completion] = ScriptedPolicy(["hello"]).act([Turn("solver", {"messages": []})])
    assert completion.text == "hello" and completion.response_token_ids is None


@pytest.mark.parametrize("text", ["", "😀 ünïcödé", "\\boxed{1}"])
def test_any_text_round_trips_through_the_tokenizer(smollm2_tokenizer, text):
    from boltzoo.agents import Turn

    [completion] = ScriptedPolicy([text], smollm2_tokenizer).act(
        [Turn("solver", {"messages": [{"role": "user", "content": "q"}]})]
    )
    assert smollm2_tokenizer.decode(completion.response_token_ids, skip_special_tokens=True) == text
