"""TaskEnv: an env from rows, reward functions and tools; its errors; check_env on it."""

from __future__ import annotations

import json

import pytest

import boltzoo
from boltzoo.agents.scripted import OraclePolicy
from boltzoo.envs import EnvCheckError, RewardFunctionError, TaskEnv, check_env
from boltzoo.errors import DatasetError

ROWS = [
    {"id": "a", "question": "What is 2 + 3?", "answer": "5", "solution": ["<add>2, 3</add>", "5"]},
    {"id": "b", "question": "What is 4 + 4?", "answer": "8", "solution": ["<add>4, 4</add>", "8"]},
    {"id": "c", "question": "What is 7 + 1?", "answer": "8", "solution": ["<add>7, 1</add>", "8"]},
]


def add(numbers: str) -> int:
    """Add numbers.

    Args:
        numbers: the numbers, separated by commas
    """
    return sum(int(n) for n in numbers.split(","))


def exact(parsed, answer):
    return float(parsed == answer)


def played(env, *actions):
    """Play ``actions`` in turn on a fresh episode of task 0; return the unwrapped env."""
    env.reset(seed=0, options={"task_index": 0})
    for action in actions:
        env.step(action)
    return env.unwrapped


def test_rows_prompt_and_reward_make_an_env_the_oracle_solves():
    env = TaskEnv(tasks=ROWS, prompt="Q: {question}", reward=exact, tools=[add], oracle="solution")
    assert env.num_tasks == 3 and [t.task_id for t in env.tasks] == ["a", "b", "c"]
    env.reset(options={"task_index": 1})
    messages = env.observe("agent")["messages"]
    assert messages[-1] == {"role": "user", "content": "Q: What is 4 + 4?"}
    assert "<add>numbers</add>" in messages[0]["content"]  # the tools are described
    # the oracle plays the row's two turns: a tool call, then the answer
    env.reset(options={"task_index": 0})
    env.step(env.oracle_action("agent"))
    assert env.observe("agent")["messages"][-1] == {
        "role": "tool",
        "content": "<add>2, 3</add> = 5",
    }
    env.step(env.oracle_action("agent"))
    info = env.infos["agent"]
    assert (info["success"], info["score"], info["rewards"], info["tool_calls"]) == (
        True, 1.0, {"exact": 1.0}, 1
    )  # fmt: skip


def test_reward_functions_get_row_fields_and_episode_arguments_by_name():
    seen = {}

    def record(completion, parsed, task, tool_calls, transcript, question, **rest):
        seen.update(completion=completion, parsed=parsed, task=task, tool_calls=tool_calls,
                    transcript=transcript, question=question, rest=set(rest))  # fmt: skip
        return 0.25

    env = TaskEnv(tasks=ROWS, reward=[exact, record], weights=[1.0, 2.0], tools={"add": add},
                  parser=lambda text: text.split()[-1], success_at=1.5)  # fmt: skip
    raw = played(env, "<add>2,3</add>", "so it is 5")
    assert seen["completion"] == "so it is 5" and seen["parsed"] == "5"
    assert seen["task"] == ROWS[0] and seen["question"] == "What is 2 + 3?"
    assert seen["tool_calls"] == [
        {"agent": "agent", "name": "add", "arguments": "2,3", "output": "5", "ok": True}
    ]
    assert seen["rest"] >= {"answer", "id", "solution"}
    assert raw.rewards["agent"] == 1.5  # 1 * 1.0 + 2 * 0.25
    assert raw.infos["agent"]["success"] and raw.infos["agent"]["score"] == 1.0


@pytest.mark.parametrize(
    "reward, words",
    [
        (lambda parsed, gold: 1.0, "asks for 'gold', which no task gives"),
        (lambda *args: 1.0, "given by name"),
        ("exact", "takes a function or a list of functions"),
        ([None], "must be callable"),
        ([], "at least one reward function"),
    ],
)
def test_reward_functions_with_bad_signatures_are_refused_when_the_env_is_made(reward, words):
    with pytest.raises(RewardFunctionError, match=words):
        TaskEnv(tasks=ROWS, reward=reward)


def test_weights_must_match_the_reward_functions():
    with pytest.raises(RewardFunctionError, match="2 weights for 1 reward functions"):
        TaskEnv(tasks=ROWS, reward=exact, weights=[1, 2])


@pytest.mark.parametrize("value", [None, "1.0", float("nan"), [1]])
def test_a_reward_that_is_not_a_finite_number_fails_the_episode_with_its_name(value):
    def broken(parsed):
        return value

    env = boltzoo.make("boltzoo.envs.task_env:TaskEnv", tasks=ROWS, reward=broken)
    with pytest.raises(RewardFunctionError, match="reward function 'broken' returned"):
        played(env, "5")
    # through rollout: the episode is failed, with the error, never scored 0
    env_id = f"tests/broken-reward-{type(value).__name__}-v0"
    boltzoo.register(env_id, TaskEnv, tasks=ROWS, reward=broken, oracle="answer")
    (episode,) = boltzoo.rollout(env_id, {"agent": OraclePolicy()}, tasks=[0], progress=False)
    assert episode.failed and "returned" in episode.error and episode.score is None


def test_a_tool_that_raises_returns_its_error_and_the_episode_goes_on():
    def divide(a: float, b: float) -> float:
        """Divide a by b."""
        return a / b

    env = TaskEnv(tasks=ROWS, reward=exact, tools=[divide])
    env.reset(options={"task_index": 0})
    env.step('<divide>{"a": 1, "b": 0}</divide> <divide>{"a": 1}</divide> <divide>7</divide>')
    tool_message = env.observe("agent")["messages"][-1]
    assert tool_message["role"] == "tool"
    lines = tool_message["content"].splitlines()
    assert lines[0].endswith("= error: ZeroDivisionError: float division by zero")
    assert lines[1].endswith('error: divide takes {"a": number, "b": number}')
    assert "takes a JSON object" in lines[2]
    env.step("5")
    assert env.infos["agent"]["success"]
    # framework agents call it with typed arguments; strings of numbers are converted
    env.reset(options={"task_index": 0})
    assert env.call_tool("agent", "divide", {"a": "9", "b": 3}) == "3.0"
    assert env.call_tool("agent", "divide", {"a": True, "b": 3}).startswith("error: divide:")
    assert env.call_tool("agent", "divide", {"a": 1}).startswith("error: divide needs")


def test_tool_schemas_come_from_type_hints_and_docstrings():
    def lookup(key: str, limit: int = 3, exact: bool | None = None) -> list:
        """Look a key up.

        Args:
            key (str): what to look for
            limit: how many results
        """
        return [key] * limit

    (spec,) = TaskEnv(tasks=ROWS, reward=exact, tools=[lookup]).tools
    assert spec.name == "lookup" and spec.description == "Look a key up."
    assert spec.parameters["properties"] == {
        "key": {"type": "string", "description": "what to look for"},
        "limit": {"type": "integer", "description": "how many results"},
        "exact": {"type": "boolean"},
    }
    assert spec.parameters["required"] == ["key"]

    def bad(items: list[str]) -> str:
        return ""

    with pytest.raises(TypeError, match="a tool takes str, int, float or bool"):
        TaskEnv(tasks=ROWS, reward=exact, tools=[bad])


def test_splits_are_explicit(tmp_path):
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    assert TaskEnv(tasks=str(train), reward=exact).num_tasks == 3
    with pytest.raises(DatasetError, match="'train' split only"):
        TaskEnv(tasks=str(train), reward=exact, split="test")
    env = TaskEnv(tasks={"train": str(train), "test": ROWS[:1]}, reward=exact, split="test")
    assert [t.task_id for t in env.tasks] == ["a"]
    with pytest.raises(DatasetError, match="no split 'dev'"):
        TaskEnv(tasks={"train": ROWS}, reward=exact, split="dev")


def test_test_size_holds_out_a_fixed_part_chosen_by_id():
    rows = [{"id": f"q{i}", "question": str(i), "answer": str(i)} for i in range(200)]
    train = TaskEnv(tasks=rows, reward=exact, test_size=0.25)
    test = TaskEnv(tasks=rows, reward=exact, test_size=0.25, split="test")
    ids = {t.task_id for t in train.tasks}, {t.task_id for t in test.tasks}
    assert not ids[0] & ids[1] and len(ids[0] | ids[1]) == 200 and 30 <= len(ids[1]) <= 70
    shuffled = TaskEnv(tasks=rows[::-1], reward=exact, test_size=0.25, split="test")
    assert {t.task_id for t in shuffled.tasks} == ids[1]  # the order of rows does not matter


@pytest.mark.parametrize(
    "rows, prompt, error, words",
    [
        (ROWS, "{question} in {unit}", DatasetError, "names {unit}, which the row does not have"),
        (ROWS, "{question", ValueError, "for a literal brace"),
        (
            [{"id": "x", "question": "q"}, {"id": "x", "question": "r"}],
            "{question}",
            DatasetError,
            "used twice",
        ),  # fmt: skip
        (["text"], "{question}", DatasetError, "a row is a JSON object"),
    ],
)
def test_bad_rows_and_templates_are_clear_errors(rows, prompt, error, words):
    with pytest.raises(error, match=words):
        TaskEnv(tasks=rows, prompt=prompt, reward=lambda completion: 0.0)


def test_a_pipeline_of_agents_each_sees_the_answer_before_it():
    env = TaskEnv(
        tasks=ROWS,
        agents=("drafter", "editor"),
        prompt={"drafter": "{question}", "editor": "Check: {question}\nDraft: {previous}"},
        reward=exact,
    )
    env.reset(options={"task_index": 0})
    env.step("6")
    assert env.agent_selection == "editor"
    assert env.observe("editor")["messages"][-1]["content"] == "Check: What is 2 + 3?\nDraft: 6"
    env.step("5")
    assert env.infos["drafter"]["success"] and env.infos["editor"]["success"]


def test_check_env_passes_a_good_task_env_and_names_what_a_bad_one_gets_wrong():
    passed = check_env(boltzoo.make("boltzoo.envs.task_env:TaskEnv", tasks=ROWS, reward=exact,
                                    tools=[add], oracle="solution"))  # fmt: skip
    assert "the oracle: 3/3 tasks succeeded" in passed
    assert "an empty reply: 0/3 tasks succeeded" in passed

    rows = [dict(r, answer=f"answer-{r['answer']}") for r in ROWS]
    with pytest.raises(ValueError, match=r"shows \['answer'\], the gold"):
        TaskEnv(tasks=rows, reward=exact, prompt="{question} ({answer})")
    leaky = boltzoo.make("boltzoo.envs.task_env:TaskEnv", tasks=rows, reward=lambda answer: 1.0,
                         prompt=lambda row: f"{row['question']} ({row['answer']})")  # fmt: skip
    with pytest.raises(EnvCheckError) as caught:
        check_env(leaky, episodes=2)
    message = str(caught.value)
    assert "shows the gold 'answer-5'" in message
    assert "an empty reply succeeded: the reward pays for nothing" in message

    wrong_oracle = boltzoo.make("boltzoo.envs.task_env:TaskEnv", tasks=ROWS, reward=exact,
                                oracle="question")  # fmt: skip
    with pytest.raises(EnvCheckError, match="the reward disagrees with the demonstration"):
        check_env(wrong_oracle, episodes=1)


def test_check_env_refuses_an_env_that_does_not_take_split():
    boltzoo.register("tests/no-split-v0", lambda: TaskEnv(tasks=ROWS, reward=exact))
    with pytest.raises(EnvCheckError, match="does not take split="):
        check_env("tests/no-split-v0")


def test_check_env_notes_a_missing_test_split():
    boltzoo.register("tests/train-only-v0", TaskEnv, tasks=ROWS, reward=exact, oracle="answer")
    passed = check_env("tests/train-only-v0", episodes=1)
    assert any(line.startswith("note: no 'test' split") for line in passed)


def test_reward_functions_of_one_name_each_count_under_names_of_their_own():
    raw = played(TaskEnv(tasks=ROWS, reward=[lambda parsed: 1.0, lambda parsed: 0.5]), "5")
    assert raw.rewards["agent"] == 1.5
    assert raw.infos["agent"]["rewards"] == {"<lambda>_1": 1.0, "<lambda>_2": 0.5}


def test_what_reward_functions_and_prompts_get_is_a_copy_of_the_row():
    def greedy(task, solution):
        solution.append("junk")
        task["answer"] = "changed"
        return 0.0

    env = TaskEnv(tasks=ROWS, reward=greedy)
    for _ in range(3):
        played(env, "5")
    assert env.tasks[0].row == ROWS[0]


def test_failures_in_the_users_functions_name_the_function_and_the_task():
    def crashes(parsed):
        raise KeyError("nope")

    with pytest.raises(RewardFunctionError, match="'crashes' raised KeyError"):
        played(TaskEnv(tasks=ROWS, reward=crashes), "5")
    with pytest.raises(RewardFunctionError, match="the parser raised ZeroDivisionError"):
        played(TaskEnv(tasks=ROWS, reward=exact, parser=lambda text: 1 / 0), "5")
    with pytest.raises(DatasetError, match="task 'a': the prompt function raised KeyError"):
        TaskEnv(tasks=ROWS, reward=exact, prompt=lambda row: row["missing"])
    with pytest.raises(TypeError, match="must be a template"):
        TaskEnv(tasks=ROWS, reward=exact, prompt=5)
    with pytest.raises(ValueError, match="names \\['solver'\\], not agents"):
        TaskEnv(tasks=ROWS, reward=exact, system={"solver": "typo"})
    rows = [dict(r, solution=[]) for r in ROWS]
    env = TaskEnv(tasks=rows, reward=exact, oracle="solution")
    env.reset(options={"task_index": 0})
    with pytest.raises(DatasetError, match="the oracle's list is empty"):
        env.oracle_action("agent")


def test_numpy_numbers_are_rewards_and_arrays_are_not():
    np = pytest.importorskip("numpy")
    assert played(TaskEnv(tasks=ROWS, reward=lambda: np.float32(0.5)), "5").rewards["agent"] == 0.5
    with pytest.raises(RewardFunctionError, match="not a number"):
        played(TaskEnv(tasks=ROWS, reward=lambda: np.array([1.0, 2.0])), "5")


def test_tool_arguments_are_converted_exactly_or_refused():
    def scale(value: float, times: int = 2, unit: str | None = None) -> str:
        """Scale a value."""
        return f"{value * times} {unit}"

    def now() -> str:
        """The time."""
        return "noon"

    env = TaskEnv(tasks=ROWS, reward=exact, tools=[scale, now])
    env.reset(options={"task_index": 0})
    assert env.call_tool("agent", "scale", {"value": "1,250", "times": 3.0}) == "3750.0 None"
    assert env.call_tool("agent", "scale", {"value": 1, "unit": None}) == "2.0 None"
    assert "whole number" in env.call_tool("agent", "scale", {"value": 1, "times": 3.7})
    assert "expected a number" in env.call_tool("agent", "scale", {"value": "2,5"})
    env.step('<now></now> <scale>{"value": 1.5, "unit": "m"}</scale>')
    assert env.observe("agent")["messages"][-1]["content"].splitlines() == [
        "<now></now> = noon",
        '<scale>{"value": 1.5, "unit": "m"}</scale> = 3.0 m',
    ]


def test_a_call_written_inside_another_is_part_of_its_text():
    def echo(text: str) -> str:
        """Echo."""
        return text

    env = TaskEnv(tasks=ROWS, reward=exact, tools=[echo, add])
    env.reset(options={"task_index": 0})
    env.step("<echo>say <add>1,2</add></echo>")
    assert env.observe("agent")["messages"][-1]["content"] == (
        "<echo>say <add>1,2</add></echo> = say <add>1,2</add>"
    )


@pytest.mark.parametrize(
    "tools, words",
    [
        ([lambda x: x], "tool name '<lambda>'"),
        ({"my tool": add}, "tool name 'my tool'"),
        ([add, add], "two tools are named 'add'"),
        ({"f": lambda x, /: x}, "positional-only"),
        ({"f": lambda x: "FooBar" + x}, None),
    ],
)
def test_tool_names_and_signatures_are_checked_when_the_env_is_made(tools, words):
    if words is None:
        assert TaskEnv(tasks=ROWS, reward=exact, tools=tools).tools[0].name == "f"
        return
    with pytest.raises((ValueError, TypeError), match=words):
        TaskEnv(tasks=ROWS, reward=exact, tools=tools)


def test_test_size_without_ids_splits_by_content_not_by_place():
    rows = [{"question": f"q{i}", "answer": str(i)} for i in range(100)]
    before = TaskEnv(tasks=rows, reward=exact, test_size=0.3, split="test", id_field="key")
    after = TaskEnv(tasks=[{"question": "new", "answer": "0"}, *rows], reward=exact,
                    test_size=0.3, split="test", id_field="key")  # fmt: skip
    questions = {t.question for t in before.tasks}
    assert questions and questions <= {t.question for t in after.tasks}
    with pytest.raises(DatasetError, match="test_size is a fraction"):
        TaskEnv(tasks=rows, reward=exact, test_size=True)


def test_the_gold_check_reads_every_agent_and_whole_words_only():
    rows = [{"id": "a", "question": "Pick 10005 or 1000.5?", "answer": "1000"}]
    assert check_env(TaskEnv(tasks=rows, reward=exact, oracle="answer"), episodes=1)
    rows = [dict(r, answer=r["answer"] + "000") for r in ROWS]
    hinted = TaskEnv(
        tasks=rows, reward=exact, agents=("first", "second"),
        prompt={"first": "{question}", "second": lambda row: f"hint: {row['answer']}."},
    )  # fmt: skip
    with pytest.raises(EnvCheckError, match="second's observation: shows the gold '5000'"):
        check_env(hinted, episodes=1)
    with pytest.raises(ValueError, match="the gold"):
        TaskEnv(tasks=ROWS, reward=exact, prompt="{question} {answer[0]}")


def test_check_env_reports_a_broken_env_as_such_not_as_split():
    boltzoo.register("tests/broken-env-v0", TaskEnv, tasks=ROWS, reward=lambda level: 0.0)
    with pytest.raises(EnvCheckError, match="making the env raised RewardFunctionError"):
        check_env("tests/broken-env-v0")


def test_a_rows_file_changed_on_disk_is_read_again(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS[:2]))
    assert TaskEnv(tasks=str(path), reward=exact).num_tasks == 2
    assert TaskEnv(tasks=str(path), reward=exact).num_tasks == 2  # parsed once, served again
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    assert [t.task_id for t in TaskEnv(tasks=str(path), reward=exact).tasks] == ["a", "b", "c"]
