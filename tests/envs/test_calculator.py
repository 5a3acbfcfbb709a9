"""Tests of the safe calculator tool: arithmetic, formatting, tag parsing, and hostile input."""

from __future__ import annotations

import dataclasses
import random
import re
import time
from fractions import Fraction

import pytest

from boltzoo.envs.tools.calculator import (
    CALC_PATTERN,
    CalcResult,
    CalculatorError,
    calculate,
    evaluate,
    find_calls,
    format_number,
    has_unclosed_call,
)


def output_of(expression: str) -> str:
    """Evaluate an expression that must succeed and return its formatted output."""
    result = evaluate(expression)
    assert result.ok, (expression, result.output)
    return result.output


# --- Precedence and associativity --------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("2+3*4", "14"),
        ("(2+3)*4", "20"),
        ("2**3**2", "512"),  # right-associative: 2**(3**2)
        ("(2**3)**2", "64"),
        ("-2**2", "-4"),  # ** binds tighter than a unary minus on its left
        ("(-2)**2", "4"),
        ("2**-1", "0.5"),
        ("2^10", "1024"),
        ("2^3^2", "512"),
        ("7//2", "3"),
        ("-7//2", "-4"),  # floor division rounds down, as in Python
        ("10-4-3", "3"),  # left-associative
        ("100/10/5", "2"),
        ("--3", "3"),
        ("+-3", "-3"),
        ("2*-3", "-6"),
        ("  1 +\n 2\t", "3"),
    ],
)
def test_operators_follow_python_precedence_and_associativity(expression, expected):
    assert output_of(expression) == expected


# --- Numbers ------------------------------------------------------------------------------------


def test_decimals_are_exact():
    result = evaluate("0.1+0.2")
    assert result.output == "0.3"
    assert calculate("0.1+0.2") == Fraction(3, 10)
    assert output_of("0.1*3 - 0.3") == "0"


@pytest.mark.parametrize(
    ("expression", "expected"),
    [(".5", "0.5"), ("3.", "3"), ("1e3", "1000"), ("2.5E-2", "0.025"), ("1e+2", "100")],
)
def test_number_literal_forms(expression, expected):
    assert output_of(expression) == expected


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("15%", "0.15"),
        ("20% * 50", "10"),
        ("200*15%", "30"),
        ("50 + 10%", "50.1"),
        ("(1+2)%", "0.03"),
    ],
)
def test_percent_divides_its_operand_by_100(expression, expected):
    assert output_of(expression) == expected


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("1,200 + 5", "1205"),
        ("12,345,678", "12345678"),
        ("1,234.5 * 2", "2469"),
        ("sqrt(1,440,000)", "1200"),  # one-argument function: the commas group thousands
        ("max(1,2,3)", "3"),
        ("max(1, 200)", "200"),
        ("max(1,200)", "200"),  # several-argument function: commas separate arguments
        ("min(1,000, 5)", "0"),
    ],
)
def test_commas_group_thousands_only_when_unambiguous(expression, expected):
    assert output_of(expression) == expected


@pytest.mark.parametrize("expression", ["1,20 + 1", "1,2345", "0,500", "1, 2"])
def test_commas_outside_argument_lists_that_are_not_thousands_are_errors(expression):
    result = evaluate(expression)
    assert not result.ok
    assert "','" in result.output


# --- Functions ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("round(2.567, 2)", "2.57"),
        ("round(2.5)", "3"),  # halves away from zero, like a pocket calculator
        ("round(-2.5)", "-3"),
        ("round(1234.5, -2)", "1200"),
        ("mod(17, 5)", "2"),
        ("mod(-7, 3)", "2"),  # sign of the divisor, as Python's %
        ("sqrt(16)", "4"),
        ("sqrt(0.25)", "0.5"),
        ("sqrt(2)", "1.414213562"),
        ("abs(-3)", "3"),
        ("min(4, -1, 2)", "-1"),
        ("max(7)", "7"),
        ("floor(-2.5)", "-3"),
        ("ceil(2.1)", "3"),
        ("SQRT(16) + Max(1, 2)", "6"),  # names are case-insensitive
        ("8**(1/3)", "2"),
        ("2**0.5", "1.414213562"),
    ],
)
def test_functions(expression, expected):
    assert output_of(expression) == expected


def test_square_root_of_a_perfect_square_stays_exact():
    assert calculate("sqrt(16)") == Fraction(4)
    assert isinstance(calculate("sqrt(2)"), float)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("max()", "max() takes at least 1 argument (got 0)"),
        ("sqrt(1, 2)", "sqrt() takes 1 argument (got 2)"),
        ("round(1, 2, 3)", "round() takes 1 or 2 arguments (got 3)"),
        ("mod(1)", "mod() takes 2 arguments (got 1)"),
        ("round(2.5, 0.5)", "whole number"),
        ("sqrt 4", "expected '(' after 'sqrt'"),
    ],
)
def test_wrong_function_calls_say_what_is_expected(expression, message):
    result = evaluate(expression)
    assert not result.ok
    assert message in result.output


# --- Formatting ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (Fraction(40), "40"),
        (Fraction(-3), "-3"),
        (Fraction(10**6), "1000000"),
        (Fraction(10**15), "1000000000000000"),
        (Fraction(1, 3), "0.3333333333"),
        (Fraction(10, 3), "3.333333333"),
        (Fraction(-2, 3), "-0.6666666667"),
        (Fraction(3, 20), "0.15"),
        (Fraction(0), "0"),
        (Fraction(10**16), "1e+16"),
        (Fraction(2**100), "1.2676506e+30"),
        (Fraction(123456789012345678), "1.23456789e+17"),
        (Fraction(1234, 10**10), "1.234e-7"),
        (4.0, "4"),
        (0.1, "0.1"),
        (2.0000000000000004, "2"),
        (-0.0, "0"),
    ],
)
def test_format_number(value, expected):
    assert format_number(value) == expected


def test_results_never_show_fraction_reprs():
    for expression in ["1/3", "2/7*3", "22/7", "1/1024"]:
        output = output_of(expression)
        assert "Fraction" not in output and "/" not in output


def test_result_carries_value_and_shortened_expression():
    result = evaluate("1/4")
    assert result == CalcResult(expression="1/4", ok=True, output="0.25", value=0.25)
    long_result = evaluate("1+" * 150 + "1")
    assert long_result.ok and long_result.output == "151"
    assert long_result.expression == ("1+" * 100) + "..."
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.ok = False  # type: ignore[misc]


# --- Finding calls in agent text ----------------------------------------------------------------


def test_find_calls_returns_every_expression_in_order():
    text = "First <calc> 2+2 </calc> then <calc>3*4</calc>, done <calc></calc>."
    assert find_calls(text) == ["2+2", "3*4", ""]


def test_find_calls_spans_lines():
    assert find_calls("total: <calc>\n 12 *\n 3\n</calc> apples") == ["12 *\n 3"]
    assert CALC_PATTERN.flags & re.DOTALL


def test_find_calls_matches_the_tag_pattern_on_random_text():
    rng = random.Random(0)
    pieces = ["<calc>", "</calc>", "1+1", " ", "x", "<calc", "calc>", "\n"]
    for _ in range(500):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 30)))
        expected = [m.group(1).strip() for m in re.finditer(r"<calc>(.*?)</calc>", text, re.S)]
        assert find_calls(text) == expected, text


def test_find_calls_is_linear_in_unclosed_tags():
    # the lazy regex rescanned the rest of the text from every unclosed tag: 33,333 of them
    # (a 200k-character action) took a minute
    started = time.perf_counter()
    assert find_calls("<calc>" * 33_333) == []
    assert find_calls("<calc>" * 33_333 + "1+2</calc>") == ["<calc>" * 33_332 + "1+2"]
    assert time.perf_counter() - started < 1.0


def test_find_calls_without_tags_is_empty():
    assert find_calls("no calculator here, 2+2=4") == []
    assert find_calls("<calc>2+2") == []


@pytest.mark.parametrize(
    ("text", "unclosed"),
    [
        ("Let me compute <calc>2+2", True),
        ("<calc>1</calc> and <calc>2*", True),
        ("<calc>2+2</calc>", False),
        ("<calc>2+2</calc> = 4", False),
        ("plain text", False),
        ("stray </calc>", False),
    ],
)
def test_has_unclosed_call(text, unclosed):
    assert has_unclosed_call(text) is unclosed


# --- Attacks and limits: each fails fast with a clear message -----------------------------------


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("9**9**9**9", "result too large"),
        ("10**10**10", "result too large"),
        ("2**100000 / 2**99999", "result too large"),
        ("0.5**100000", "exponent too large"),
        ("(1/3)**500", "number too precise"),
        ("__import__('os').system('id')", "unexpected character '_'"),
        ("().__class__", "unexpected character '.'"),
        ("1/0", "division by zero"),
        ("1//0", "division by zero"),
        ("mod(1, 0)", "division by zero"),
        ("0**-1", "division by zero"),
        ("1+" * 50_000 + "1", "expression too long (100001 chars, limit 500)"),
        ("(" * 10_000 + "1" + ")" * 10_000, "expression too long"),
        ("(-8)**(1/3)", "negative number to a fractional power"),
        ("sqrt(-1)", "square root of a negative number"),
        ("1e999999", "number out of range"),
        ("1e150", "number too large"),
        ("1" * 31, "number too long"),
        ("10**100 * 10", "result too large"),
        ("", "empty expression"),
        ("   ", "empty expression"),
        ("2 +", "unexpected end of expression"),
        ("(1+2", "missing ')'"),
        ("1+2)", "unexpected ')'"),
        ("2 3", "unexpected number '3'"),
        ("foo(3)", "unknown name 'foo'"),
        ("pi * 2", "unknown name 'pi'"),
        ("1; 2", "unexpected character ';'"),
        ("x = 2", "unknown name 'x'"),
        ("[1]", "unexpected character '['"),
        ("'1'", "unexpected character"),
        ("２＋２", "unexpected character '２'"),
        ("💥", "unexpected character '💥'"),
        ("\x00", "unexpected character '\\x00'"),
        ("1 × 2", "unexpected character '×'"),
    ],
)
def test_hostile_or_broken_input_fails_fast_with_a_message(expression, message):
    start = time.perf_counter()
    result = evaluate(expression)
    elapsed = time.perf_counter() - start
    assert elapsed < 1.0
    assert not result.ok
    assert result.value is None
    assert result.output.startswith("error: ")
    assert message in result.output


@pytest.mark.parametrize(
    "expression",
    [
        "(" * 10_000 + "1" + ")" * 10_000,
        "-" * 10_000 + "1",
        "2**" * 1_000 + "2",
        "sqrt(" * 60 + "4",
    ],
)
def test_deep_nesting_is_refused_even_when_the_length_limit_allows_it(expression):
    start = time.perf_counter()
    # a time limit far above the milliseconds this takes: the nesting limit must refuse it,
    # whatever pause (a garbage collection of the suite's heap) lands in the parse
    result = evaluate(expression, max_length=10**6, time_limit_s=5.0)
    assert time.perf_counter() - start < 5.0  # catches a blow-up, not milliseconds
    assert result.output == "error: expression too deeply nested (limit 50)"


def test_nesting_up_to_the_limit_is_fine():
    assert output_of("(" * 50 + "1" + ")" * 50) == "1"


@pytest.mark.slow
def test_long_flat_sum_needs_no_recursion():
    result = evaluate("1+" * 50_000 + "1", max_length=10**6, time_limit_s=30)
    assert result.output == "50001"


def test_time_limit_stops_the_calculation():
    assert evaluate("1+1", time_limit_s=0).output == "error: calculation took too long"


def test_calculate_raises_calculator_error_which_is_a_value_error():
    with pytest.raises(CalculatorError, match="division by zero"):
        calculate("1/0")
    assert issubclass(CalculatorError, ValueError)


def test_evaluate_never_raises_on_random_strings():
    rng = random.Random(1234)
    alphabet = "0123456789.,+-*/^%() eE_abcdfgilmnoqrstx;'\"[]=\x00💥２"
    for _ in range(2000):
        expression = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        result = evaluate(expression)
        assert isinstance(result, CalcResult)
        assert result.ok or result.output.startswith("error: ")


# --- Property: agrees with a reference evaluator on random integer expressions ------------------

# A tree is either an int leaf or a tuple (operator, left, right) with operator in "+-*".
PRECEDENCE = {"+": 1, "-": 1, "*": 2}


def random_tree(rng: random.Random, depth: int) -> int | tuple:
    if depth == 0 or rng.random() < 0.3:
        return rng.randint(-9, 9)
    return (rng.choice("+-*"), random_tree(rng, depth - 1), random_tree(rng, depth - 1))


def reference_value(tree: int | tuple) -> int:
    if isinstance(tree, int):
        return tree
    operator, left, right = tree
    a, b = reference_value(left), reference_value(right)
    return a + b if operator == "+" else a - b if operator == "-" else a * b


def render(tree: int | tuple, rng: random.Random) -> str:
    """Write the tree with the parentheses precedence needs, plus some redundant ones."""
    if isinstance(tree, int):
        text = str(tree)
        return f"({text})" if tree < 0 and rng.random() < 0.5 else text
    operator, left, right = tree
    left_text, right_text = render(left, rng), render(right, rng)
    if isinstance(left, tuple) and PRECEDENCE[left[0]] < PRECEDENCE[operator]:
        left_text = f"({left_text})"
    # The right operand needs parentheses when it binds no tighter (a - (b + c), a * (b - c)).
    if isinstance(right, tuple) and PRECEDENCE[right[0]] <= PRECEDENCE[operator]:
        right_text = f"({right_text})"
    text = f"{left_text} {operator} {right_text}"
    return f"({text})" if rng.random() < 0.1 else text


def test_random_integer_expressions_match_a_reference_evaluator():
    rng = random.Random(20240607)
    for _ in range(300):
        tree = random_tree(rng, depth=5)
        expression = render(tree, rng)
        expected = reference_value(tree)
        assert calculate(expression) == expected, expression
        assert evaluate(expression).output == format_number(Fraction(expected)), expression
