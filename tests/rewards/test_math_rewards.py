"""Tests for boltzoo.rewards.math: final-answer extraction, number parsing and matching."""

from fractions import Fraction

import pytest

from boltzoo.rewards.math import (
    extract_answer,
    extract_final_answer,
    is_percent,
    numbers_match,
    numeric_answer_reward,
    parse_number,
)

# ---------------------------------------------------------------------------------------------
# extract_final_answer
# ---------------------------------------------------------------------------------------------


def test_last_boxed_wins_over_earlier_boxed():
    assert extract_final_answer(r"First \boxed{3}, then corrected: \boxed{4}") == "4"


def test_nested_braces_in_boxed():
    assert extract_final_answer(r"So $\boxed{\frac{1}{2}}$.") == r"\frac{1}{2}"


def test_escaped_braces_in_boxed_do_not_close_it():
    assert extract_final_answer(r"\boxed{\{1, 2\}}") == r"\{1, 2\}"


def test_boxed_with_space_and_fbox_are_recognised():
    assert extract_final_answer(r"\boxed {x + 1}") == "x + 1"
    assert extract_final_answer(r"\fbox{7}") == "7"


def test_empty_boxed_is_no_answer():
    assert extract_final_answer(r"I give up: \boxed{}") is None
    assert extract_final_answer(r"\boxed{  }") is None


def test_empty_boxed_falls_through_to_answer_line():
    assert extract_final_answer("Answer: 12\n" + r"\boxed{}") == "12"


def test_unclosed_boxed_is_skipped_for_an_earlier_complete_one():
    assert extract_final_answer(r"\boxed{5} ... \boxed{6") == "5"
    assert extract_final_answer(r"\boxed{6") is None


def test_boxed_has_priority_over_hashes_and_answer_line():
    text = "Answer: 1\n#### 2\n" + r"\boxed{3}" + "\nAnswer: 4"
    assert extract_final_answer(text) == "3"


def test_gsm8k_hashes_to_end_of_line():
    assert extract_final_answer("She pays 1234 dollars.\n#### 1,234\n") == "1,234"


def test_hashes_have_priority_over_answer_line():
    assert extract_final_answer("#### 7\nAnswer: 8") == "7"


def test_five_hashes_are_not_the_gsm8k_marker():
    assert extract_final_answer("##### Heading") is None


def test_answer_line_variants():
    assert extract_final_answer("Final answer: 42") == "42"
    assert extract_final_answer("**Answer:** 42") == "42"
    assert extract_final_answer("**Answer**: 42") == "42"
    assert extract_final_answer("ANSWER: 42") == "42"


def test_multiple_answer_lines_last_wins():
    assert extract_final_answer("Answer: 10\nWait, recheck.\nAnswer: 12") == "12"


def test_answer_line_stops_at_end_of_line():
    assert extract_final_answer("Answer: 5\nbecause 2 + 3 = 5") == "5"


def test_trailing_period_and_whitespace_are_stripped():
    assert extract_final_answer("Answer:   3.5.  ") == "3.5"


def test_answer_heading_alone_takes_the_next_line():
    assert extract_final_answer("**Final Answer:**\n\n42\n") == "42"


def test_mid_sentence_answer_colon_at_line_end_does_not_take_next_line():
    assert extract_final_answer("Let us find the answer:\nfirst 6 apples") is None


def test_answer_dollar_is_kept_for_parsing():
    assert extract_final_answer("Answer: $5") == "$5"


def test_no_marker_gives_none():
    assert extract_final_answer("The total is 42.") is None
    assert extract_final_answer("") is None


# ---------------------------------------------------------------------------------------------
# extract_answer
# ---------------------------------------------------------------------------------------------


def test_extract_answer_prefers_explicit_answer_over_last_number():
    assert extract_answer(r"\boxed{7} and later 9") == "7"


def test_extract_answer_falls_back_to_last_number():
    assert extract_answer("3 apples plus 4 apples makes 7 apples.") == "7"


def test_extract_answer_fallback_can_be_disabled():
    assert extract_answer("makes 7 apples", fallback_last_number=False) is None


def test_extract_answer_fallback_keeps_percent_sign():
    assert extract_answer("The discount is 15%.") == "15%"


def test_extract_answer_text_with_no_number_is_none():
    assert extract_answer("I do not know.") is None


# ---------------------------------------------------------------------------------------------
# parse_number
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("42", Fraction(42)),
        ("-3", Fraction(-3)),
        ("0.5", Fraction(1, 2)),
        (".5", Fraction(1, 2)),
        ("42.", Fraction(42)),
        ("x = 42", Fraction(42)),
        ("42 apples", Fraction(42)),
        ("The answer is 42 apples", Fraction(42)),
    ],
)
def test_plain_numbers_parse_exactly(text, expected):
    value = parse_number(text)
    assert value == expected
    assert isinstance(value, Fraction)


def test_commas_as_thousands_separators():
    assert parse_number("1,234,567") == 1234567
    assert parse_number("#### 1,234") == 1234
    assert parse_number("1,234.5") == Fraction(2469, 2)


def test_commas_not_in_groups_of_three_split_numbers():
    # "1,2" is a list of two numbers, not 12; the last one is taken.
    assert parse_number("1,2") == 2
    assert parse_number("1,2345") == 2345


def test_currency_is_ignored():
    assert parse_number("$1,200.50") == Fraction(240100, 200)
    assert parse_number(r"\$42") == 42
    assert parse_number("-$5") == -5


def test_fraction_forms():
    assert parse_number("3/4") == Fraction(3, 4)
    assert parse_number(r"\frac{3}{4}") == Fraction(3, 4)
    assert parse_number(r"\dfrac{3}{4}") == Fraction(3, 4)
    assert parse_number(r"\tfrac12") == Fraction(1, 2)
    assert parse_number(r"-\frac{3}{4}") == Fraction(-3, 4)


def test_mixed_numbers():
    assert parse_number("2 1/2") == Fraction(5, 2)
    assert parse_number(r"2\frac{1}{2}") == Fraction(5, 2)
    assert parse_number("-2 1/2") == Fraction(-5, 2)
    assert parse_number("She ate 2 1/2.") == Fraction(5, 2)


def test_improper_fraction_after_integer_is_not_a_mixed_number():
    assert parse_number("3 5/4") == Fraction(5, 4)


def test_unicode_vulgar_fraction():
    assert parse_number("2½ cups") == Fraction(5, 2)


def test_unicode_minus():
    assert parse_number("\u22125") == -5
    assert parse_number("x = \u22120.25") == Fraction(-1, 4)


def test_minus_after_a_digit_is_subtraction_not_a_sign():
    assert parse_number("5-3") == 3


def test_percent_parses_as_the_written_number():
    assert parse_number("15%") == 15
    assert is_percent("15%")
    assert is_percent("15 percent")
    assert is_percent(r"15\%")
    assert not is_percent("15")
    assert not is_percent("no number")


def test_scientific_notation_is_a_float():
    value = parse_number("1.5e3")
    assert isinstance(value, float)
    assert value == 1500.0
    assert parse_number(r"1.5 \times 10^{3}") == 1500.0


def test_unit_exponent_is_not_the_number():
    assert parse_number("42 m^2") == 42
    assert parse_number(r"42\,\text{cm}^2") == 42


def test_latex_thousands_spacing():
    assert parse_number(r"1\,000") == 1000
    assert parse_number("1{,}234") == 1234


def test_no_number_gives_none():
    assert parse_number("no digits here") is None
    assert parse_number("") is None


def test_division_by_zero_is_not_a_number():
    assert parse_number("1/0") is None


# ---------------------------------------------------------------------------------------------
# numbers_match
# ---------------------------------------------------------------------------------------------


def test_percent_matches_whole_number_gold():
    assert numbers_match("15%", "15")


def test_percent_matches_fraction_gold():
    assert numbers_match("15%", "0.15")


def test_percent_equivalence_is_symmetric():
    assert numbers_match("0.15", "15%")
    assert numbers_match("15", "15%")


def test_percent_equivalence_can_be_disabled():
    assert not numbers_match("15%", "0.15", percent_equivalence=False)
    assert numbers_match("15%", "15", percent_equivalence=False)


def test_decimal_is_not_a_percent_of_a_plain_number():
    assert not numbers_match("0.15", "15")


def test_relative_tolerance_edges():
    # rel_tol 1e-4 of ~100 is ~0.01: a 0.005 difference passes, 0.02 does not.
    assert numbers_match("100.005", "100")
    assert not numbers_match("100.02", "100")


def test_absolute_tolerance_near_zero():
    assert numbers_match("0.0000005", "0")
    assert not numbers_match("0.00001", "0")


def test_negative_and_decimal_gold():
    assert numbers_match("-2.5", "-5/2")
    assert numbers_match("\u22122.5", "-2.5")
    assert not numbers_match("2.5", "-2.5")


def test_fraction_matches_decimal():
    assert numbers_match(r"\frac{1}{3}", "0.33333")
    assert not numbers_match(r"\frac{1}{3}", "0.33")


def test_none_or_unparseable_never_matches():
    assert not numbers_match(None, "1")
    assert not numbers_match("no idea", "1")
    assert not numbers_match("1", "n/a")


def test_huge_values_compare_without_overflow():
    big = "1" + "0" * 400
    assert numbers_match(big, big)
    assert not numbers_match(big, big + "1")


def test_degenerate_digit_run_does_not_raise():
    assert parse_number("1" * 5000) is None
    assert parse_number("7 " + "1" * 5000) == 7


def test_non_string_gold_is_accepted():
    assert numbers_match("42", 42)


# ---------------------------------------------------------------------------------------------
# numeric_answer_reward
# ---------------------------------------------------------------------------------------------


def test_reward_gsm8k_style_answer():
    assert numeric_answer_reward("6 * 200 = 1200 plus 34\n#### 1,234", "1234") == 1.0


def test_reward_boxed_fraction():
    assert numeric_answer_reward(r"Thus $\boxed{\dfrac{3}{4}}$.", "0.75") == 1.0


def test_reward_answer_line_with_dollar():
    assert numeric_answer_reward("Cost is 2 + 3.\nAnswer: $5", "5") == 1.0


def test_reward_uses_explicit_answer_not_last_number():
    # The boxed 7 is the answer even though 8 appears later.
    assert numeric_answer_reward(r"\boxed{7} (checked in 8 steps)", "8") == 0.0


def test_reward_falls_back_to_last_number():
    assert numeric_answer_reward("so she has 42 apples", "42") == 1.0


def test_reward_zero_when_no_number():
    assert numeric_answer_reward("I cannot solve this.", "42") == 0.0


def test_reward_empty_boxed_uses_last_number():
    assert numeric_answer_reward(r"It is 9. \boxed{}", "9") == 1.0


def test_reward_passes_tolerances():
    assert numeric_answer_reward("Answer: 101", "100", rel_tol=0.02) == 1.0
    assert numeric_answer_reward("Answer: 101", "100") == 0.0


def test_markdown_heading_with_four_hashes_is_not_a_final_answer():
    assert extract_final_answer("#### Step 3: add the costs\nThe total is 12.") is None
    assert extract_final_answer("#### Step 1\nwork\n#### 42") == "42"
    assert extract_final_answer("#### $1,234") == "$1,234"
    assert extract_final_answer("#### -5") == "-5"
    assert extract_final_answer("#### \\frac{1}{2}") == "\\frac{1}{2}"
