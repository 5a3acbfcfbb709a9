"""math-v0: the PettingZoo contract, the solver/verifier protocol, data sources, attacks, misuse."""

from __future__ import annotations

import json
import time

import pytest
from pettingzoo.test import api_test

import boltzoo
from boltzoo.agents import OraclePolicy
from boltzoo.envs.math_v0 import REMINDER
from boltzoo.envs.protocol import parse_verdict
from boltzoo.errors import DatasetError, EpisodeEndedError, InvalidActionError, UnknownAgentError

VARIANTS = [("solver",), ("solver", "verifier")]


def play(env, actions_by_agent, seed=0, task_index=0):
    """Play one episode where each agent's actions come from a list; return the raw env."""
    env.reset(seed=seed, options={"task_index": task_index})
    queues = {a: list(acts) for a, acts in actions_by_agent.items()}
    for agent in env.agent_iter():
        _, _, term, trunc, _ = env.last()
        env.step(None if term or trunc else queues[agent].pop(0))
    return env.unwrapped


@pytest.mark.parametrize("agents", VARIANTS)
@pytest.mark.parametrize("level", ["easy", "hard"])
def test_pettingzoo_api_test_passes(agents, level):
    env = boltzoo.make("boltzoo/math-v0", agents=agents, level=level)
    api_test(env, num_cycles=200)


def test_pettingzoo_registry_makes_the_same_env():
    import pettingzoo

    env = pettingzoo.make("aec", "boltzoo/math-v0", level="medium")
    assert type(env.unwrapped).__name__ == "raw_env"
    assert env.unwrapped.tasks[0].level == "medium"


@pytest.mark.parametrize("split", ["train", "test"])
@pytest.mark.parametrize("level", ["easy", "medium", "hard"])
@pytest.mark.parametrize("agents", VARIANTS)
@pytest.mark.slow
def test_oracle_scores_one_on_every_bundled_task(level, split, agents):
    episodes = boltzoo.rollout(
        "boltzoo/math-v0",
        {a: OraclePolicy() for a in agents},
        tasks=range(boltzoo.make("math-v0", level=level, split=split).unwrapped.num_tasks),
        level=level,
        split=split,
        agents=agents,
        progress=False,
    )
    assert len(episodes) > 150
    assert not [e.error for e in episodes if e.failed]
    assert all(e.success and e.score == 1.0 for e in episodes)
    # The team reward reaches every agent.
    assert all(e.returns() == {a: 1.0 for a in agents} for e in episodes)


def test_oracle_scores_one_on_a_gsm8k_file(tmp_path):
    rows = [
        {
            "question": "Tom has 3 bags of 4 apples. How many apples?",
            "answer": "3*4 = <<3*4=12>>12\n#### 12",
        },
        {"question": "A car costs $1,500 and a bike $250. Together?", "answer": "#### 1,750"},
        {"question": "Half of 9?", "answer": "9/2 = <<9/2=4.5>>4.5\n#### 4.5"},
    ]
    path = tmp_path / "gsm8k.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    env = boltzoo.make("math-v0", dataset="gsm8k", path=str(path))
    assert env.unwrapped.num_tasks == 3
    assert [t.question for t in env.unwrapped.tasks] == [r["question"] for r in rows]
    episodes = boltzoo.rollout(
        "math-v0",
        {"solver": OraclePolicy()},
        tasks=[0, 1, 2],
        dataset="gsm8k",
        path=str(path),
        progress=False,
    )
    assert [e.score for e in episodes] == [1.0, 1.0, 1.0]
    # One file is the train split only: the trainer's evaluation (split="test") never plays it.
    with pytest.raises(DatasetError, match="'train' split only"):
        boltzoo.make("math-v0", dataset="gsm8k", path=str(path), split="test")
    held_out = tmp_path / "held_out.jsonl"
    held_out.write_text(json.dumps(rows[2]) + "\n")
    files = {"train": str(path), "test": str(held_out)}
    test = boltzoo.make("math-v0", dataset="gsm8k", path=files, split="test").unwrapped
    assert [t.question for t in test.tasks] == [rows[2]["question"]]


def test_seed_picks_the_same_task_and_options_pick_by_index():
    env = boltzoo.make("math-v0")
    picked = []
    for _ in range(2):
        env.reset(seed=123)
        picked.append(env.unwrapped.current_task.task_id)
    assert picked[0] == picked[1]
    seen = set()
    for seed in range(20):
        env.reset(seed=seed)
        seen.add(env.unwrapped.task_index)
    assert len(seen) > 10  # seeds spread over the split
    env.reset(seed=5, options={"task_index": 7, "unknown_key": 1})
    assert env.unwrapped.task_index == 7
    assert env.unwrapped.current_task is env.unwrapped.tasks[7]


def test_observation_carries_question_but_never_the_gold_answer():
    env = boltzoo.make("math-v0", split="test")
    for index in range(50):
        env.reset(options={"task_index": index})
        obs = env.observe("solver")
        task = env.unwrapped.current_task
        assert obs["messages"][-1] == {"role": "user", "content": task.question}
        assert obs["task_id"] == task.task_id
        json.dumps(obs)  # plain JSON values
        if task.expression:
            assert task.expression not in json.dumps(obs)


def test_calculator_results_come_back_as_a_tool_message_and_another_turn():
    env = boltzoo.make("math-v0")
    env.reset(options={"task_index": 0})
    env.step("First <calc>12*3</calc> then <calc>1/0</calc>.")
    assert env.agent_selection == "solver"
    messages = env.observe("solver")["messages"]
    assert messages[-2] == {
        "role": "assistant",
        "content": "First <calc>12*3</calc> then <calc>1/0</calc>.",
    }
    assert messages[-1]["role"] == "tool"
    assert "<calc>12*3</calc> = 36" in messages[-1]["content"]
    assert "division by zero" in messages[-1]["content"]
    info = env.infos["solver"]
    assert (info["tool_calls"], info["tool_errors"], info["turns"]) == (2, 1, 1)


def test_action_without_tool_or_answer_gets_a_reminder():
    env = boltzoo.make("math-v0")
    env.reset(options={"task_index": 0})
    env.step("I am thinking.")
    assert env.observe("solver")["messages"][-1] == {"role": "user", "content": REMINDER}
    assert env.rewards["solver"] == 0.0 and not env.terminations["solver"]


def test_wrong_answer_scores_zero_and_right_answer_one():
    env = boltzoo.make("math-v0")
    gold = boltzoo.make("math-v0").unwrapped.tasks[0].answer
    raw = play(env, {"solver": [f"So \\boxed{{{float(gold) + 1:g}}}"]})
    assert raw.episode.score == 0.0 and raw.episode.success is False
    raw = play(env, {"solver": [f"#### {gold}"]})
    assert raw.episode.success is True and raw.episode.final_rewards == {"solver": 1.0}


def test_max_turns_truncates_with_score_zero():
    env = boltzoo.make("math-v0", max_turns=3)
    env.reset(options={"task_index": 0})
    for _ in range(3):
        env.step("<calc>1+1</calc>")
    assert all(env.truncations.values()) and not any(env.terminations.values())
    assert env.infos["solver"]["success"] is False and env.infos["solver"]["score"] == 0.0
    assert env.unwrapped.episode.truncated


def test_lenient_answer_takes_the_last_number_only_at_the_turn_limit():
    gold = boltzoo.make("math-v0").unwrapped.tasks[0].answer
    lenient = boltzoo.make("math-v0", max_turns=2, lenient_answer=True, format_reward=0.1)
    # before the limit an unmarked number is not an answer: the reminder comes, as without it
    lenient.reset(options={"task_index": 0})
    lenient.step(f"It is {gold}")
    assert lenient.agent_selection == "solver" and not any(lenient.terminations.values())
    # at the limit the last number counts (no format reward: nothing was marked)
    lenient.step(f"First 1 then {gold}.")
    assert lenient.terminations["solver"] and lenient.infos["solver"]["success"] is True
    assert lenient.unwrapped.episode.final_rewards == {"solver": 1.0}
    # a wrong last number scores 0, terminated (not truncated); no number at all truncates
    raw = play(lenient, {"solver": ["Hmm.", f"{gold} plus 1 is {float(gold) + 1:g}"]})
    assert raw.episode.terminated and raw.episode.score == 0.0
    raw = play(lenient, {"solver": ["Hmm.", "no idea"]})
    assert raw.episode.truncated and raw.episode.score == 0.0
    # the strict default scores the same text 0
    strict = boltzoo.make("math-v0", max_turns=1)
    raw = play(strict, {"solver": [f"It is {gold}"]})
    assert raw.episode.truncated and raw.episode.success is False


def test_verifier_rejection_sends_the_reason_back_and_next_answer_is_final():
    env = boltzoo.make("math-v0", agents=("solver", "verifier"))
    gold = env.unwrapped.tasks[0].answer
    raw = play(
        env,
        {
            "solver": ["\\boxed{-1}", f"Fixed: \\boxed{{{gold}}}"],
            "verifier": ["VERDICT: INCORRECT - it cannot be negative"],
        },
    )
    chat = [s.observation["messages"] for s in raw.episode.steps]
    assert [s.agent for s in raw.episode.steps] == ["solver", "verifier", "solver"]
    assert "Proposed answer: -1" in chat[1][-1]["content"]
    assert "it cannot be negative" in chat[2][-1]["content"]
    assert raw.episode.success is True
    assert raw.episode.returns() == {"solver": 1.0, "verifier": 1.0}


def test_verifier_checks_only_once():
    env = boltzoo.make("math-v0", agents=("solver", "verifier"))
    raw = play(
        env,
        {"solver": ["\\boxed{-1}", "\\boxed{-2}"], "verifier": ["VERDICT: INCORRECT - no"]},
    )
    assert [s.agent for s in raw.episode.steps] == ["solver", "verifier", "solver"]
    assert raw.episode.terminated and raw.episode.success is False


@pytest.mark.parametrize(
    "text, accepted",
    [
        ("VERDICT: CORRECT", True),
        ("verdict: incorrect - off by one", False),
        ("**Verdict:** Correct.", True),
        ("The answer is wrong.", False),
        ("VERDICT: INCORRECT\nVERDICT: CORRECT", True),
        ("looks fine 👍", True),
        ("", True),
    ],
)
def test_verdicts_are_parsed_leniently(text, accepted):
    assert parse_verdict(text)[0] is accepted


def test_tool_and_format_rewards_are_paid_but_never_change_score():
    gold = boltzoo.make("math-v0").unwrapped.tasks[0].answer
    actions = ["<calc>2+2</calc> <calc>1/0</calc>", f"\\boxed{{{gold}}}"]
    plain = play(boltzoo.make("math-v0"), {"solver": actions}).episode
    shaped = play(
        boltzoo.make("math-v0", tool_reward=0.1, format_reward=0.05), {"solver": actions}
    ).episode
    assert plain.score == shaped.score == 1.0 and plain.success == shaped.success
    assert plain.returns()["solver"] == pytest.approx(1.0)
    # one successful calculator call (0.1), the format reward (0.05), the task reward (1)
    assert shaped.returns()["solver"] == pytest.approx(1.15)
    assert shaped.steps[0].rewards == {"solver": pytest.approx(0.1)}


def test_tool_reward_on_success_is_paid_at_the_end_of_successful_episodes_only():
    gold = boltzoo.make("math-v0").unwrapped.tasks[0].answer
    calls = "<calc>2+2</calc> <calc>3*3</calc> <calc>1/0</calc>"  # two succeed, one fails
    gated = {"tool_reward": 0.1, "tool_reward_on_success": True}
    right = play(boltzoo.make("math-v0", **gated), {"solver": [calls, f"\\boxed{{{gold}}}"]})
    wrong = play(boltzoo.make("math-v0", **gated), {"solver": [calls, "\\boxed{-1}"]})
    # Nothing is paid as the calls are made: a failing episode cannot farm the bonus.
    assert right.episode.steps[0].rewards == wrong.episode.steps[0].rewards == {"solver": 0.0}
    # At a success, the two calls that evaluated are paid with the task reward (1 + 2 * 0.1).
    assert right.episode.success and right.episode.returns()["solver"] == pytest.approx(1.2)
    assert right.episode.steps[-1].rewards == {"solver": pytest.approx(1.2)}
    assert not wrong.episode.success and wrong.episode.returns()["solver"] == 0.0
    # A truncated episode is a failure too: the calls made before the turn limit earn nothing.
    cut = play(boltzoo.make("math-v0", max_turns=2, **gated), {"solver": [calls, calls]})
    assert cut.episode.truncated and cut.episode.returns()["solver"] == 0.0
    assert cut.episode.steps[-1].info["tool_calls"] == 6


ATTACKS = [
    "<calc>9**9**9**9</calc>",
    "<calc>__import__('os').system('id')</calc>",
    "<calc>().__class__</calc>",
    "<calc>1/0</calc>",
    "<calc>" + "1+" * 50_000 + "1</calc>",
]


@pytest.mark.parametrize(
    "attack", ATTACKS, ids=["power-tower", "import", "dunder", "div0", "100kB"]
)
def test_calculator_attacks_come_back_as_messages_quickly_and_episode_goes_on(attack):
    env = boltzoo.make("math-v0")
    env.reset(options={"task_index": 0})
    started = time.perf_counter()
    env.step(f"Let me try {attack}")
    elapsed = time.perf_counter() - started
    assert elapsed < 1.0
    last = env.observe("solver")["messages"][-1]
    assert last["role"] == "tool" and "error" in last["content"]
    assert len(last["content"]) < 2_000  # the message is readable, not the whole attack echoed
    assert env.infos["solver"]["tool_errors"] == 1
    assert env.agent_selection == "solver" and not env.terminations["solver"]
    env.step(f"\\boxed{{{env.unwrapped.current_task.answer}}}")
    assert env.unwrapped.episode.success is True


def test_hundred_kilobyte_action_without_tags_is_handled_quickly():
    env = boltzoo.make("math-v0")
    env.reset(options={"task_index": 0})
    started = time.perf_counter()
    env.step("x" * 100_000)
    assert time.perf_counter() - started < 1.0
    assert env.observe("solver")["messages"][-1]["content"] == REMINDER


def test_overlong_action_is_cut_at_the_limit_and_noted():
    env = boltzoo.make("math-v0", max_action_chars=1_000)
    env.reset(options={"task_index": 0})
    gold = env.unwrapped.current_task.answer
    env.step("a" * 2_000 + f"\\boxed{{{gold}}}")  # the answer lies past the cut
    assert env.infos["solver"]["action_truncated"] is True
    assert len(env.observe("solver")["messages"][-2]["content"]) == 1_000
    assert not env.terminations["solver"]
    env.step(f"\\boxed{{{gold}}}")
    assert env.infos["solver"]["action_truncated"] is False


def test_completion_action_is_kept_untouched_in_the_record():
    env = boltzoo.make("math-v0")
    env.reset(options={"task_index": 0})
    completion = boltzoo.Completion(
        text="\\boxed{1}", prompt_token_ids=[1, 2], response_token_ids=[3, 4], logprobs=[-0.5, -0.1]
    )
    env.step(completion)
    assert env.unwrapped.episode.steps[0].action is completion


@pytest.mark.parametrize("bad", [42, b"bytes", ["list"], {"text": "x"}, 3.5])
def test_non_text_action_is_a_clear_error(bad):
    env = boltzoo.make("math-v0")
    env.reset()
    with pytest.raises(InvalidActionError, match="must be text"):
        env.step(bad)


def test_step_after_the_episode_ended_is_a_clear_error():
    env = boltzoo.make("math-v0")
    env.reset(options={"task_index": 0})
    env.step("\\boxed{1}")
    with pytest.raises(EpisodeEndedError, match="only step None"):
        env.step("\\boxed{2}")
    env.step(None)  # PettingZoo's dead step is fine
    with pytest.raises(EpisodeEndedError, match="reset"):
        env.step("again")


def test_unknown_agent_names_are_clear_errors():
    with pytest.raises(UnknownAgentError, match="choose one of"):
        boltzoo.make("math-v0", agents=("solver", "critic"))
    env = boltzoo.make("math-v0")
    with pytest.raises(UnknownAgentError, match="critic"):
        env.observation_space("critic")


def test_bad_data_arguments_are_clear_errors(tmp_path):
    with pytest.raises(DatasetError, match="easy"):
        boltzoo.make("math-v0", level="impossible")
    with pytest.raises(DatasetError, match="path"):
        boltzoo.make("math-v0", dataset="gsm8k")
    with pytest.raises(FileNotFoundError):
        boltzoo.make("math-v0", dataset="gsm8k", path=str(tmp_path / "missing.jsonl"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q", "answer": "#### 1"}\n{"question": "no answer"}\n')
    with pytest.raises(DatasetError, match="2"):
        boltzoo.make("math-v0", dataset="gsm8k", path=str(bad))


def test_task_index_out_of_range_is_a_clear_error():
    env = boltzoo.make("math-v0")
    with pytest.raises(IndexError, match="out of range"):
        env.reset(options={"task_index": env.unwrapped.num_tasks})


def test_ansi_render_shows_the_transcript():
    env = boltzoo.make("math-v0", render_mode="ansi")
    env.reset(options={"task_index": 0})
    env.step("<calc>6*7</calc>")
    text = env.render()
    assert "[solver] <calc>6*7</calc>" in text and "[calculator] <calc>6*7</calc> = 42" in text


def test_oracle_scores_one_on_a_calcx_file(tmp_path):
    rows = [
        {
            "id": "a1",
            "question": "Sum of 2 and 3?",
            "result": "5",
            "chain": '<gadget id="calculator">2+3</gadget><output>5</output>',
        },
        {"id": "a2", "question": "One third of 1?", "result": "1/3"},
        {"id": "a3", "question": "Seconds in an hour?", "result": "3_600"},
    ]
    path = tmp_path / "calcx.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    env = boltzoo.make("math-v0", dataset="calcx", path=str(path))
    assert [t.task_id for t in env.unwrapped.tasks] == ["a1", "a2", "a3"]
    episodes = boltzoo.rollout(
        "math-v0",
        {"solver": OraclePolicy()},
        tasks=[0, 1, 2],
        dataset="calcx",
        path=str(path),
        progress=False,
    )
    assert [e.score for e in episodes] == [1.0, 1.0, 1.0]


@pytest.mark.parametrize(
    "text",
    [
        "中文 答案 \\boxed{",
        "😀" * 1000,
        "\u202e\u200b\ufeff",
        "\x00\x1b[31m",
        "\ud800 lone surrogate",
    ],
)
def test_any_unicode_action_is_handled(text):
    env = boltzoo.make("math-v0", agents=("solver", "verifier"))
    env.reset(options={"task_index": 0})
    env.step(text)
    assert env.agent_selection == "solver" and not env.terminations["solver"]
    json.dumps(env.observe("solver"))


def test_system_prompt_is_the_agents_and_every_answer_marker_still_counts():
    prompt = "Solve it. End with a last line 'Answer: N'."
    env = boltzoo.make("math-v0", system_prompt=prompt)
    env.reset(options={"task_index": 2})
    messages = env.observe("solver")["messages"]
    assert messages[0] == {"role": "system", "content": prompt}
    gold = env.unwrapped.current_task.answer
    env.step(f"12 and 30 make it.\nAnswer: {gold}")
    assert env.unwrapped.episode.success
    assert env.unwrapped.episode.metadata["prompts"] == {"solver": prompt}


def test_prompts_replace_the_named_agents_defaults_only():
    env = boltzoo.make("math-v0", agents=("solver", "verifier"), prompts={"verifier": "Judge."})
    env.reset(options={"task_index": 0})
    solver_prompt = env.observe("solver")["messages"][0]["content"]
    assert "Example." in solver_prompt  # the default, with its worked example
    env.step("\\boxed{1}")
    assert env.observe("verifier")["messages"][0] == {"role": "system", "content": "Judge."}
    no_example = boltzoo.make("math-v0", few_shot=False).unwrapped.prompts["solver"]
    assert "Example." not in no_example and no_example in solver_prompt


def test_prompts_for_an_unknown_agent_or_given_twice_are_clear_errors():
    with pytest.raises(UnknownAgentError, match="writer"):
        boltzoo.make("math-v0", prompts={"writer": "Write SQL."})
    with pytest.raises(ValueError, match="once"):
        boltzoo.make("math-v0", system_prompt="a", prompts={"solver": "b"})
    with pytest.raises(TypeError, match="str"):
        boltzoo.make("math-v0", prompts={"solver": 42})


@pytest.mark.parametrize("agents", VARIANTS)
def test_oracle_calls_the_calculator_then_answers_when_turns_allow(agents):
    episodes = boltzoo.rollout(
        "math-v0", {a: OraclePolicy() for a in agents}, tasks=[0, 1], agents=agents, progress=False
    )
    for episode in episodes:
        solver = [s for s in episode.steps if s.agent == "solver"]
        assert solver[0].action.text.startswith("<calc>") and solver[0].info["tool_calls"] == 1
        assert "\\boxed{" in solver[1].action.text and episode.success
    # One turn only: the answer at once.
    (short,) = boltzoo.rollout(
        "math-v0", {"solver": OraclePolicy()}, tasks=[0], max_turns=1, progress=False
    )
    assert len(short.steps) == 1 and short.success
