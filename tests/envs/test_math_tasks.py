"""Tests for boltzoo.envs.data.math_tasks: seeded generators and GSM8K / Calc-X loaders."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from fractions import Fraction

import pytest

from boltzoo.envs.data.loaders import load_calcx, load_gsm8k
from boltzoo.envs.data.math_tasks import (
    LEVELS,
    SPLITS,
    MathTask,
    generate_tasks,
)

_TOKEN_RE = re.compile(r"\d+\.?\d*|\.\d+|[-+*/()]")
_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2}
# Canonical generated answers: a non-negative integer or a decimal with 1-2 places, no
# trailing zero after the point.
_ANSWER_RE = re.compile(r"(0|[1-9]\d*)(\.\d?[1-9])?")


def exact_eval(expression: str) -> Fraction:
    """Shunting-yard over Fractions for the calculator grammar (binary + - * /, parentheses)."""
    tokens = _TOKEN_RE.findall(expression)
    assert "".join(tokens) == re.sub(r"\s+", "", expression), f"stray text in {expression!r}"
    values: list[Fraction] = []
    operators: list[str] = []

    def apply(operator: str) -> None:
        right, left = values.pop(), values.pop()
        if operator == "+":
            values.append(left + right)
        elif operator == "-":
            values.append(left - right)
        elif operator == "*":
            values.append(left * right)
        else:
            values.append(left / right)

    for token in tokens:
        if token in _PRECEDENCE:
            while (
                operators
                and operators[-1] != "("
                and (_PRECEDENCE[operators[-1]] >= _PRECEDENCE[token])
            ):
                apply(operators.pop())
            operators.append(token)
        elif token == "(":
            operators.append(token)
        elif token == ")":
            while operators[-1] != "(":
                apply(operators.pop())
            operators.pop()
        else:
            values.append(Fraction(token))
    while operators:
        apply(operators.pop())
    assert len(values) == 1, f"malformed {expression!r}"
    return values[0]


def all_tasks(level: str, seed: int = 0) -> list[MathTask]:
    return generate_tasks(level, "train", seed=seed) + generate_tasks(level, "test", seed=seed)


def operation_count(expression: str) -> int:
    return sum(1 for token in _TOKEN_RE.findall(expression) if token in _PRECEDENCE)


def numbers_in(text: str) -> list[Fraction]:
    return [Fraction(n) for n in re.findall(r"\d+(?:\.\d+)?", text)]


# --- the test evaluator itself -------------------------------------------------------------


def test_exact_eval_follows_precedence_and_stays_exact():
    assert exact_eval("(12*3)+4") == 40
    assert exact_eval("10-4-3") == 3
    assert exact_eval("48/2/3") == 8
    assert exact_eval("2+3*4") == 14
    assert exact_eval("1/3*3") == 1
    assert exact_eval("0.1+0.2") == Fraction(3, 10)


# --- generators -------------------------------------------------------------------------------


@pytest.mark.parametrize("level", LEVELS)
def test_same_seed_gives_identical_lists_and_a_fresh_list_each_call(level):
    first = generate_tasks(level, "train", seed=0)
    second = generate_tasks(level, "train", seed=0)
    assert first == second
    assert first is not second
    first.clear()  # mutating a returned list must not touch the cache
    assert generate_tasks(level, "train", seed=0) == second


@pytest.mark.parametrize("level", LEVELS)
def test_different_seed_gives_different_tasks(level):
    seed_zero = [task.question for task in generate_tasks(level, "train", seed=0)]
    seed_one = [task.question for task in generate_tasks(level, "train", seed=1)]
    assert seed_zero != seed_one
    assert len(set(seed_zero) & set(seed_one)) < len(seed_zero) // 2


def test_defaults_are_easy_train_seed_zero():
    assert generate_tasks() == generate_tasks("easy", "train", seed=0)


@pytest.mark.parametrize("level", LEVELS)
def test_train_and_test_are_disjoint(level):
    train = {task.question for task in generate_tasks(level, "train")}
    test = {task.question for task in generate_tasks(level, "test")}
    assert train and test
    assert not train & test


@pytest.mark.parametrize("level", LEVELS)
def test_split_of_a_question_does_not_depend_on_seed(level):
    split_of: dict[str, str] = {}
    for seed in (0, 1, 2):
        for split in SPLITS:
            for task in generate_tasks(level, split, seed=seed):
                assert split_of.setdefault(task.question, split) == split


@pytest.mark.parametrize("level", LEVELS)
def test_counts_per_level(level):
    train, test = generate_tasks(level, "train"), generate_tasks(level, "test")
    assert len(test) >= 150
    assert len({task.question for task in train + test}) >= 2000
    assert len(train) > 5 * len(test)  # roughly a 90/10 split


@pytest.mark.parametrize("level", LEVELS)
def test_questions_and_ids_are_unique_within_a_level(level):
    tasks = all_tasks(level)
    assert len({task.question for task in tasks}) == len(tasks)
    assert len({task.task_id for task in tasks}) == len(tasks)


@pytest.mark.parametrize("level", LEVELS)
def test_generated_task_fields(level):
    for task in all_tasks(level):
        assert re.fullmatch(rf"{level}-[0-9a-f]{{8}}", task.task_id)
        assert task.level == level
        assert task.template
        assert task.question.endswith("?")
        assert task.expression is not None


@pytest.mark.parametrize("level", LEVELS)
def test_at_least_eight_templates_per_level_appear_in_train(level):
    templates = {task.template for task in generate_tasks(level, "train")}
    assert len(templates) >= 8


@pytest.mark.parametrize("level", LEVELS)
def test_each_template_has_several_phrasings(level):
    # Mask numbers and capitalised words (names, sentence starts): what is left is the wording.
    skeletons: dict[str, set[str]] = defaultdict(set)
    for task in generate_tasks(level, "train"):
        masked = re.sub(r"\d+(?:\.\d+)?", "N", task.question)
        skeletons[task.template].add(re.sub(r"\b[A-Z][a-z]*\b", "X", masked))
    for template, shapes in skeletons.items():
        assert len(shapes) >= 3, template


@pytest.mark.parametrize("seed", [0, 7])
@pytest.mark.parametrize("level", LEVELS)
def test_every_expression_evaluates_exactly_to_the_answer(level, seed):
    for task in all_tasks(level, seed):
        assert _ANSWER_RE.fullmatch(task.answer), task
        assert exact_eval(task.expression) == Fraction(task.answer), task


@pytest.mark.parametrize(
    ("level", "fewest", "most"), [("easy", 1, 2), ("medium", 2, 3), ("hard", 3, 5)]
)
def test_operation_counts_match_the_level(level, fewest, most):
    for task in all_tasks(level):
        assert fewest <= operation_count(task.expression) <= most, task


def test_easy_numbers_are_two_digit_and_answers_non_negative_integers():
    for task in all_tasks("easy"):
        for number in numbers_in(task.question) + numbers_in(task.expression):
            assert number.denominator == 1 and 10 <= number <= 99, task
        answer = Fraction(task.answer)
        assert answer.denominator == 1 and answer >= 0, task


def test_medium_answers_are_integers_and_numbers_stay_small():
    for task in all_tasks("medium"):
        assert Fraction(task.answer).denominator == 1, task
        assert max(numbers_in(task.expression)) <= 500, task


def test_hard_answers_have_at_most_two_decimal_places():
    places = set()
    for task in all_tasks("hard"):
        whole, _, fraction = task.answer.partition(".")
        assert len(fraction) <= 2, task
        places.add(len(fraction))
    assert places >= {0, 1}  # hard includes money/decimal answers, not only integers




def test_bad_level_error_names_the_valid_levels():
    with pytest.raises(ValueError) as error:
        generate_tasks("expert")
    message = str(error.value)
    assert "expert" in message
    assert all(level in message for level in LEVELS)


def test_bad_split_error_names_the_valid_splits():
    with pytest.raises(ValueError) as error:
        generate_tasks("easy", "validation")
    message = str(error.value)
    assert "validation" in message
    assert all(split in message for split in SPLITS)


# --- GSM8K loader -----------------------------------------------------------------------------


def write_jsonl(path, rows) -> None:
    """Rows are dicts (dumped) or raw strings (written as-is, e.g. blank or broken lines)."""
    lines = [row if isinstance(row, str) else json.dumps(row) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_load_gsm8k_parses_answers_expressions_and_ids(tmp_path):
    path = tmp_path / "gsm8k.jsonl"
    write_jsonl(
        path,
        [
            {
                "question": "Natalia sold clips to 48 friends in April, and half as many in May.",
                "answer": "In May she sold 48/2 = <<48/2=24>>24 clips.\n"
                "In total <<48+24=72>>72.\n#### 72",
            },
            "",
            {
                "question": "A farm has 1,000 hens and buys 234 more.",
                "answer": "1,000 + 234 = <<1000+234=1234>>1,234\n#### 1,234",
                "id": "farm-7",
            },
            "   ",
            {
                "question": "What is half of 5?",
                "answer": "5 * .5 = <<5*.5=2.5>>2.5\n#### 2.5",
            },
            {
                "question": "An annotation that does not give the final answer.",
                "answer": "<<3*4=12>>12 apples, minus 2 leaves 10\n#### 10",
            },
            {"question": "No annotations at all.", "answer": "Just 7.\n#### 7"},
        ],
    )
    tasks = load_gsm8k(path)
    assert [task.task_id for task in tasks] == [
        "gsm8k-0",
        "farm-7",
        "gsm8k-2",
        "gsm8k-3",
        "gsm8k-4",
    ]
    assert [task.answer for task in tasks] == ["72", "1234", "2.5", "10", "7"]
    assert [task.expression for task in tasks] == ["48+24", "1000+234", "5*.5", None, None]
    assert all(task.level == "file" and task.template is None for task in tasks)
    assert tasks[0].question.startswith("Natalia sold clips")
    for task in tasks:
        if task.expression is not None:
            assert exact_eval(task.expression) == Fraction(task.answer)


def test_load_gsm8k_missing_field_names_the_line(tmp_path):
    path = tmp_path / "broken.jsonl"
    write_jsonl(
        path,
        [{"question": "ok", "answer": "#### 1"}, "", {"question": "no answer here"}],
    )
    with pytest.raises(ValueError, match=r"line 3") as error:
        load_gsm8k(path)
    assert "broken.jsonl" in str(error.value)
    assert "answer" in str(error.value)


def test_load_gsm8k_bad_json_names_the_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    write_jsonl(path, [{"question": "ok", "answer": "#### 1"}, '{"question": oops'])
    with pytest.raises(ValueError, match=r"bad\.jsonl.*line 2.*JSON"):
        load_gsm8k(path)


def test_load_gsm8k_answer_without_final_marker_is_rejected(tmp_path):
    path = tmp_path / "nofinal.jsonl"
    write_jsonl(path, [{"question": "q", "answer": "The answer is 5."}])
    with pytest.raises(ValueError, match=r"line 1.*####"):
        load_gsm8k(path)


def test_load_gsm8k_missing_file_raises_with_the_path(tmp_path):
    path = tmp_path / "nowhere.jsonl"
    with pytest.raises(FileNotFoundError, match="nowhere.jsonl"):
        load_gsm8k(path)


# --- Calc-X loader ----------------------------------------------------------------------------


def test_load_calcx_normalises_results_and_takes_the_last_gadget(tmp_path):
    path = tmp_path / "calcx.jsonl"
    chain = (
        '<gadget id="calculator">3_600 / 12</gadget><output>300</output> '
        '<gadget id="calculator">300 * 12</gadget><output>3_600</output> '
        "<result>3_600</result>"
    )
    write_jsonl(
        path,
        [
            {"id": "ape210k__001", "question": "Seconds in an hour?", "chain": chain,
             "result": "3_600"},
            "",
            {"question": "Half of 25?", "result": "12.5",
             "chain": '<gadget id="calculator">25/2</gadget><output>25/2 = around 12.5</output>'},
            {"question": "One over two?", "result": "1/2"},
            {"question": "One third?", "result": "1/3",
             "chain": '<gadget id="calculator">1 / 3</gadget>'},
            {"question": "Seven as a number?", "result": 7},
            {"question": "A float result", "result": 2.5},
            {"question": "Gadget disagrees", "result": "10",
             "chain": '<gadget id="calculator">sqrt(81)</gadget>'},
            {"question": "Thousands", "result": "1,250"},
        ],
    )  # fmt: skip
    tasks = load_calcx(path)
    assert [task.task_id for task in tasks] == [
        "ape210k__001", "calcx-1", "calcx-2", "calcx-3", "calcx-4", "calcx-5", "calcx-6",
        "calcx-7",
    ]  # fmt: skip
    assert [task.answer for task in tasks] == [
        "3600", "12.5", "0.5", "1/3", "7", "2.5", "10", "1250",
    ]  # fmt: skip
    assert [task.expression for task in tasks] == [
        "300*12", "25/2", None, "1/3", None, None, None, None,
    ]  # fmt: skip
    assert all(task.level == "file" and task.template is None for task in tasks)


def test_load_calcx_missing_result_names_the_line(tmp_path):
    path = tmp_path / "calcx_broken.jsonl"
    write_jsonl(path, [{"question": "ok", "result": "1"}, "", "", {"question": "no result"}])
    with pytest.raises(ValueError, match=r"calcx_broken\.jsonl.*line 4.*result"):
        load_calcx(path)


def test_load_calcx_non_numeric_result_names_the_line(tmp_path):
    path = tmp_path / "calcx_text.jsonl"
    write_jsonl(path, [{"question": "q", "result": "seven"}])
    with pytest.raises(ValueError, match=r"line 1"):
        load_calcx(path)


def test_load_calcx_missing_file_raises_with_the_path(tmp_path):
    path = tmp_path / "missing_calcx.jsonl"
    with pytest.raises(FileNotFoundError, match="missing_calcx.jsonl"):
        load_calcx(path)
