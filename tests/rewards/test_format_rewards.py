"""Tests for boltzoo.rewards.format: final-answer presence and tool-call tag checks."""

import pytest

from boltzoo.rewards.format import format_reward, has_final_answer, tool_calls_well_formed

# ---------------------------------------------------------------------------------------------
# has_final_answer
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [r"\boxed{4}", "#### 4", "Answer: 4", "**Final Answer:** four"])
def test_explicit_markers_count_as_final_answer(text):
    assert has_final_answer(text)


def test_bare_number_is_not_a_final_answer():
    assert not has_final_answer("so it is 4")


def test_empty_boxed_is_not_a_final_answer():
    assert not has_final_answer(r"\boxed{}")


# ---------------------------------------------------------------------------------------------
# tool_calls_well_formed
# ---------------------------------------------------------------------------------------------


def test_no_tool_calls_is_well_formed():
    assert tool_calls_well_formed("Just thinking. Answer: 3")


def test_sequential_calls_are_well_formed():
    assert tool_calls_well_formed("<calc>2+3</calc> gives 5, <calc>5*4</calc> gives 20")


def test_unclosed_tag_is_malformed():
    assert not tool_calls_well_formed("<calc>2+3 gives 5")


def test_unclosed_second_call_is_malformed():
    assert not tool_calls_well_formed("<calc>1+1</calc> then <calc>2+2")


def test_closing_tag_without_opening_is_malformed():
    assert not tool_calls_well_formed("2+3</calc>")


def test_nested_calls_are_malformed():
    assert not tool_calls_well_formed("<calc>1 + <calc>2</calc></calc>")


def test_empty_call_is_malformed():
    assert not tool_calls_well_formed("<calc></calc>")
    assert not tool_calls_well_formed("<calc>  \n </calc>")
    assert not tool_calls_well_formed("<calc/>")


def test_custom_tag_and_other_tags_ignored():
    # Only the given tag is checked: a stray <calc> does not matter when checking <search>.
    assert tool_calls_well_formed("<search>query</search> <calc>", tag="search")
    assert not tool_calls_well_formed("<search>query <calc>1</calc>", tag="search")
    # The tag name is matched exactly, not as a prefix.
    assert tool_calls_well_formed("<calculator>", tag="calc")


def test_tag_with_regex_characters_is_escaped():
    assert tool_calls_well_formed("<a.b>x</a.b>", tag="a.b")
    assert tool_calls_well_formed("<axb>", tag="a.b")


# ---------------------------------------------------------------------------------------------
# format_reward
# ---------------------------------------------------------------------------------------------


def test_format_reward_gives_weight_when_answer_and_calls_ok():
    text = "<calc>6*7</calc> = 42\nAnswer: 42"
    assert format_reward(text) == pytest.approx(0.1)
    assert format_reward(text, weight=0.5) == 0.5


def test_format_reward_zero_without_final_answer():
    assert format_reward("<calc>6*7</calc> = 42") == 0.0


def test_format_reward_zero_with_malformed_call():
    assert format_reward("<calc>6*7 = 42\nAnswer: 42") == 0.0


def test_format_reward_uses_given_tag():
    text = "<sql>SELECT 1</sql>\nAnswer: 1"
    assert format_reward(text, tag="sql") == pytest.approx(0.1)
    assert format_reward("<sql>SELECT 1\nAnswer: 1", tag="sql") == 0.0
