"""Tests for boltzoo.rewards.qa: SQuAD-style normalisation, exact match and token F1."""

import pytest

from boltzoo.rewards.qa import (
    best_score,
    exact_match,
    extract_short_answer,
    normalize_answer,
    qa_scores,
    token_f1,
)

# ---------------------------------------------------------------------------------------------
# normalize_answer
# ---------------------------------------------------------------------------------------------


def test_normalize_lowercases_drops_punctuation_articles_and_extra_space():
    assert normalize_answer("  The  Eiffel-Tower, Paris! ") == "eiffeltower paris"


def test_normalize_drops_articles_only_as_whole_words():
    assert normalize_answer("An apple and a theory") == "apple and theory"


def test_normalize_applies_nfkc():
    # Full-width letters and the "fi" ligature become plain ASCII.
    assert normalize_answer("ＰＡＲＩＳ") == "paris"
    assert normalize_answer("\ufb01sh") == "fish"


def test_normalize_drops_unicode_punctuation():
    assert normalize_answer("\u201cdon\u2019t\u201d") == normalize_answer('"don\'t"') == "dont"


# ---------------------------------------------------------------------------------------------
# exact_match
# ---------------------------------------------------------------------------------------------


def test_articles_and_punctuation_ignored_by_exact_match():
    assert exact_match("The Beatles!", "beatles") == 1.0


def test_exact_match_different_answers():
    assert exact_match("Rolling Stones", "Beatles") == 0.0


def test_exact_match_requires_whole_answer():
    assert exact_match("Paris France", "Paris") == 0.0


# ---------------------------------------------------------------------------------------------
# token_f1
# ---------------------------------------------------------------------------------------------


def test_f1_partial_overlap_by_hand():
    # pred tokens: [barack, obama, jr]  gold tokens: [barack, hussein, obama]
    # common = 2 (barack, obama); precision = 2/3; recall = 2/3; F1 = 2*(4/9)/(4/3) = 2/3
    assert token_f1("Barack Obama Jr.", "Barack Hussein Obama") == pytest.approx(2 / 3)


def test_f1_unequal_lengths_by_hand():
    # pred: [new, york, city] (3), gold: [new, york] (2); common = 2
    # precision = 2/3, recall = 1, F1 = 2*(2/3)/(5/3) = 4/5
    assert token_f1("New York City", "New York") == pytest.approx(0.8)


def test_f1_counts_repeated_tokens_once_per_occurrence():
    # pred: [very, very, good]; gold: [very, good]
    # multiset overlap = min(2,1) very + 1 good = 2; precision = 2/3, recall = 1 -> F1 = 0.8
    assert token_f1("very very good", "very good") == pytest.approx(0.8)


def test_f1_exact_answer_is_one():
    assert token_f1("the Nile", "Nile.") == 1.0


def test_f1_no_overlap_is_zero():
    assert token_f1("Amazon", "Nile") == 0.0


def test_f1_both_empty_is_one_and_one_empty_is_zero():
    assert token_f1("", "") == 1.0
    # "the" normalises to empty: only articles.
    assert token_f1("the", "") == 1.0
    assert token_f1("", "Nile") == 0.0
    assert token_f1("Nile", "a") == 0.0


def test_f1_yes_no_mismatch_is_zero():
    assert token_f1("yes", "no") == 0.0
    # Would otherwise share the token "no".
    assert token_f1("no", "no way") == 0.0
    assert token_f1("yes it is", "yes") == 0.0
    assert token_f1("Yes.", "yes") == 1.0


# ---------------------------------------------------------------------------------------------
# best_score / qa_scores
# ---------------------------------------------------------------------------------------------


def test_best_score_takes_max_over_aliases():
    golds = ["United States of America", "USA", "US"]
    assert best_score(exact_match, "the USA", golds) == 1.0


def test_best_score_empty_golds_is_zero():
    assert best_score(token_f1, "anything", []) == 0.0


def test_best_score_single_string_gold_is_not_split_into_characters():
    # Iterating "Nile" would give golds "N", "i", ... and an exact match of 0 for "Nile".
    assert best_score(exact_match, "Nile", "Nile") == 1.0


def test_qa_scores_returns_best_em_and_best_f1():
    em, f1 = qa_scores("Barack Obama", ["Barack Hussein Obama", "Obama"])
    assert em == 0.0
    # vs "barack hussein obama": p = 1, r = 2/3, F1 = 0.8; vs "obama": p = 1/2, r = 1, F1 = 2/3
    assert f1 == pytest.approx(0.8)


def test_qa_scores_reads_a_generator_once():
    em, f1 = qa_scores("Paris", (gold for gold in ["London", "paris"]))
    assert (em, f1) == (1.0, 1.0)


def test_qa_scores_empty_golds():
    assert qa_scores("Paris", []) == (0.0, 0.0)


# ---------------------------------------------------------------------------------------------
# extract_short_answer
# ---------------------------------------------------------------------------------------------


def test_short_answer_from_answer_line():
    reply = "The tower is in the capital of France.\nAnswer: Paris"
    assert extract_short_answer(reply) == "Paris"


def test_short_answer_last_answer_line_wins():
    assert extract_short_answer("Answer: Lyon\nNo, wait.\n**Answer:** Paris.") == "Paris"


def test_short_answer_answer_line_beats_boxed():
    assert extract_short_answer(r"\boxed{Lyon}" + "\nAnswer: Paris") == "Paris"


def test_short_answer_from_boxed_unwraps_text():
    assert extract_short_answer(r"It is $\boxed{\text{Paris}}$") == "Paris"


def test_short_answer_whole_text_when_no_marker():
    assert extract_short_answer("  Paris \n") == "Paris"


def test_short_answer_then_exact_match():
    assert exact_match(extract_short_answer("Final answer: The Nile."), "Nile") == 1.0
