"""SQuAD-style metrics for short-answer QA (retrieval QA, HotpotQA, TriviaQA-style data).

Both metrics compare *normalised* strings (see :func:`normalize_answer`):

* :func:`exact_match` is 1.0 when the normalised strings are equal;
* :func:`token_f1` is the F1 of the multiset overlap of normalised tokens;
* :func:`best_score` / :func:`qa_scores` take the best over several gold aliases;
* :func:`extract_short_answer` cuts the answer out of a chatty LLM reply first.

Only the standard library is used.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable

from .math import _last_answer_line, _last_boxed

__all__ = [
    "normalize_answer",
    "exact_match",
    "token_f1",
    "best_score",
    "qa_scores",
    "extract_short_answer",
]

_ARTICLES_RE = re.compile(r"\b(a|an|the)\b")
_ASCII_PUNCTUATION = frozenset(string.punctuation)
# Answers that F1 must not give partial credit to: "no" vs "yes" share no token, but
# "noanswer" vs "no answer" would; HotpotQA's evaluation zeroes these mismatches.
_SPECIAL_ANSWERS = frozenset({"yes", "no", "noanswer"})
# LaTeX text wrappers that models put inside \boxed{}: "\boxed{\text{Paris}}" -> "Paris".
_TEXT_WRAPPER_RE = re.compile(r"\\(?:text|textbf|textit|textrm|mathrm|mbox)\s*\{([^{}]*)\}")


def _is_punctuation(ch: str) -> bool:
    """Return whether ``ch`` is ASCII punctuation or any unicode punctuation (category P*)."""
    return ch in _ASCII_PUNCTUATION or unicodedata.category(ch).startswith("P")


def normalize_answer(s: str) -> str:
    """Return ``s`` normalised for comparison, as in the SQuAD evaluation script (a ``str``).

    Steps: unicode NFKC (so full-width letters and ligatures compare equal to plain ones;
    an addition to SQuAD), lowercase, drop punctuation (ASCII as in SQuAD, plus unicode
    punctuation such as curly quotes and dashes, which LLMs emit), drop the articles
    ``a``/``an``/``the``, and collapse whitespace.
    """
    s = unicodedata.normalize("NFKC", s).lower()
    s = "".join(ch for ch in s if not _is_punctuation(ch))
    s = _ARTICLES_RE.sub(" ", s)
    return " ".join(s.split())


def exact_match(prediction: str, gold: str) -> float:
    """Return 1.0 if ``prediction`` equals ``gold`` after :func:`normalize_answer`, else 0.0."""
    return 1.0 if normalize_answer(prediction) == normalize_answer(gold) else 0.0


def token_f1(prediction: str, gold: str) -> float:
    """Return the SQuAD token F1 (a ``float`` in [0, 1]) between ``prediction`` and ``gold``.

    Tokens are the whitespace-split words of :func:`normalize_answer`; overlap counts shared
    tokens with multiplicity. Edge cases: both empty -> 1.0, exactly one empty -> 0.0; and, as
    in HotpotQA's evaluation, when either side normalises to ``yes``/``no``/``noanswer`` and
    the two differ -> 0.0.
    """
    pred_norm, gold_norm = normalize_answer(prediction), normalize_answer(gold)
    if (pred_norm in _SPECIAL_ANSWERS or gold_norm in _SPECIAL_ANSWERS) and pred_norm != gold_norm:
        return 0.0
    pred_tokens, gold_tokens = pred_norm.split(), gold_norm.split()
    if not pred_tokens or not gold_tokens:
        return 1.0 if pred_tokens == gold_tokens else 0.0
    common = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
    if common == 0:
        return 0.0
    precision = common / len(pred_tokens)
    recall = common / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def best_score(metric: Callable[[str, str], float], prediction: str, golds: Iterable[str]) -> float:
    """Return the highest ``metric(prediction, gold)`` over ``golds`` (a ``float``).

    ``golds`` holds the gold answer and its aliases; an empty one gives 0.0. A single ``str``
    is taken as one gold, not as an iterable of characters.
    """
    if isinstance(golds, str):
        golds = [golds]
    return max((metric(prediction, gold) for gold in golds), default=0.0)


def qa_scores(prediction: str, golds: Iterable[str]) -> tuple[float, float]:
    """Return ``(exact_match, f1)``, each the best over ``golds`` (gold answer and aliases).

    ``golds`` may be a one-shot iterator; it is read once. Empty ``golds`` -> ``(0.0, 0.0)``.
    """
    gold_list = [golds] if isinstance(golds, str) else list(golds)
    return (
        best_score(exact_match, prediction, gold_list),
        best_score(token_f1, prediction, gold_list),
    )


def extract_short_answer(text: str) -> str:
    """Return the answer text of an LLM reply (a ``str``; possibly empty).

    In priority order: the content of the last ``Answer:`` line (case-insensitive, markdown
    allowed, as in :func:`boltzoo.rewards.math.extract_final_answer`), else the content of the
    last ``\\boxed{}``, else the whole text stripped. LaTeX text wrappers are unwrapped
    (``\\boxed{\\text{Paris}}`` -> ``Paris``) so normalisation does not glue ``text`` onto the
    answer.
    """
    answer = _last_answer_line(text)
    if answer is None:
        answer = _last_boxed(text)
    if answer is None:
        answer = text.strip()
    return _TEXT_WRAPPER_RE.sub(r"\1", answer).strip()
