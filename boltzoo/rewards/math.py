"""Numeric answer extraction and matching for math tasks (GSM8K, MATH-style).

The pipeline is ``text -> extract_answer -> parse_number -> numbers_match``:

* :func:`extract_final_answer` finds an *explicit* final answer (``\\boxed{}``, ``####``,
  ``Answer:``);
* :func:`extract_answer` falls back to the last number in the text;
* :func:`parse_number` turns an answer string into an exact :class:`~fractions.Fraction`
  (or a ``float`` for scientific notation);
* :func:`numbers_match` compares two answer strings within a tolerance;
* :func:`numeric_answer_reward` is the whole pipeline as a 0/1 reward.

Percent decision: ``parse_number("15%")`` returns the number as written, ``Fraction(15)``;
:func:`is_percent` tells whether it was written as a percent, and :func:`numbers_match` (with
``percent_equivalence=True``) accepts either reading, so ``"15%"`` matches both ``"15"`` and
``"0.15"``. Keeping the percent out of ``parse_number`` avoids silently dividing by 100 when
the gold itself is "15" for a question asking "what percent ...".

Only the standard library is used.
"""

from __future__ import annotations

import math
import re
import unicodedata
from fractions import Fraction
from typing import NamedTuple

__all__ = [
    "extract_final_answer",
    "extract_answer",
    "parse_number",
    "is_percent",
    "numbers_match",
    "numeric_answer_reward",
]

# --------------------------------------------------------------------------------------------
# Final-answer markers
# --------------------------------------------------------------------------------------------

# `\boxed{`, `\boxed {` and `\fbox{`; the brace content is read by a balanced scan, not a regex.
_BOXED_RE = re.compile(r"\\(?:boxed|fbox)\s*\{")
# GSM8K's marker; exactly four hashes, so a `#####` run is not mistaken for it, and followed by
# a number, so a markdown heading ("#### Step 3: add") is not taken for a final answer.
_HASHES_RE = re.compile(
    r"(?<!#)####(?!#)[ \t]*(?P<rest>(?=[$€£+\-−(]*(?:\d|\.\d|\\[dt]?frac))[^\n]*)"
)
# "Answer:", "Final answer:", "**Answer:**", "**Answer**:"; the word boundary stops "answers:".
_ANSWER_RE = re.compile(r"\banswer\s*[*_]*\s*:(?P<rest>[^\n]*)", re.IGNORECASE)
# What may precede "Answer:" on a line for it to count as a heading: markdown and "Final".
_HEADING_PREFIX_RE = re.compile(r"[\s*_#>-]*(?:final\s*)?", re.IGNORECASE)


def _clean_answer(s: str) -> str:
    """Return ``s`` without surrounding whitespace, markdown emphasis or one trailing period."""
    s = s.strip().strip("*_").strip()
    if s.endswith("."):
        s = s[:-1].rstrip()
    return s


def _matching_braces(text: str) -> dict[int, int]:
    """Return a map from the index of each ``{`` in ``text`` to the index of its closing ``}``.

    Escaped braces (``\\{``, ``\\}``) do not count, so ``\\boxed{\\{1, 2\\}}`` keeps its set.
    A ``{`` that never closes (e.g. a generation cut off mid-answer) is absent. One pass, so
    replies with many unclosed boxes stay linear time.
    """
    pairs: dict[int, int] = {}
    open_stack: list[int] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            i += 2  # skip the escaped character, whatever it is
            continue
        if ch == "{":
            open_stack.append(i)
        elif ch == "}" and open_stack:
            pairs[open_stack.pop()] = i
        i += 1
    return pairs


def _last_boxed(text: str) -> str | None:
    """Return the cleaned content of the last closed, non-empty ``\\boxed{}``/``\\fbox{}``."""
    matches = list(_BOXED_RE.finditer(text))
    if not matches:
        return None
    pairs = _matching_braces(text)
    for match in reversed(matches):
        open_index = match.end() - 1
        if open_index not in pairs:
            continue  # unclosed (truncated) box: an earlier complete one is the best evidence
        content = _clean_answer(text[match.end() : pairs[open_index]])
        if content:
            return content
    return None


def _last_hashes(text: str) -> str | None:
    """Return the cleaned rest of line after the last non-empty GSM8K ``####`` marker."""
    for match in reversed(list(_HASHES_RE.finditer(text))):
        content = _clean_answer(match.group("rest"))
        if content:
            return content
    return None


def _last_answer_line(text: str) -> str | None:
    """Return the cleaned content after the last ``Answer:`` marker that has one.

    The content is the rest of the line. When the marker is a heading alone on its line
    (``"**Final Answer:**\\n\\n42"``) the content is the next non-empty line, as models often
    put the value there; a mid-sentence ``"... the answer:"`` ending a line is not a heading.
    """
    for match in reversed(list(_ANSWER_RE.finditer(text))):
        content = _clean_answer(match.group("rest"))
        line_start = text.rfind("\n", 0, match.start()) + 1
        if not content and _HEADING_PREFIX_RE.fullmatch(text[line_start : match.start()]):
            for line in text[match.end() :].splitlines():
                content = _clean_answer(line)
                if content:
                    break
        if content:
            return content
    return None


def extract_final_answer(text: str) -> str | None:
    """Return the content of the explicit final answer in ``text`` (a ``str``), or None.

    Markers, in priority order (the first kind present wins; within a kind, the last one):

    1. ``\\boxed{...}`` / ``\\boxed {...}`` / ``\\fbox{...}``, with balanced braces
       (``\\boxed{\\frac{1}{2}}`` gives ``\\frac{1}{2}``); unclosed boxes are skipped;
    2. ``#### ...`` (GSM8K) to the end of the line;
    3. ``Answer: ...`` (case-insensitive, so also ``Final answer:`` and ``**Answer:**``) to the
       end of the line, or the next non-empty line when the marker is a heading alone on
       its line (``**Final Answer:**``).

    The content is stripped of whitespace, markdown ``*``/``_`` and one trailing period.
    Empty markers (``\\boxed{}``, a bare ``####``) are ignored, as if absent, so an empty box
    cannot earn a format reward.
    """
    for finder in (_last_boxed, _last_hashes, _last_answer_line):
        answer = finder(text)
        if answer is not None:
            return answer
    return None


# --------------------------------------------------------------------------------------------
# Numbers
# --------------------------------------------------------------------------------------------

# An unsigned decimal: thousands groups only when every group has 3 digits ("1,234" but not
# "1,2" or "1,2345", which read as separate numbers), an optional fraction part, or ".5".
_DEC = r"(?:(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?|\.\d+)"

_NUMBER_RE = re.compile(
    rf"""
    # A sign only where it cannot be a binary minus: "5-3" is 5 and 3, "x = -3" is -3.
    (?P<sign>(?<![\w.)\]}}])[-+])?
    (?:
        # mixed number "2 1/2" (spaces/tabs only, never across lines)
        (?P<whole>\d+)[ \t]+(?P<mnum>\d+)/(?P<mden>\d+)(?![\d/]|[.,]\d)
      | (?P<fnum>{_DEC})[ \t]*/[ \t]*(?P<fden>{_DEC})     # fraction "3/4", "1.5/2"
      | (?P<dec>{_DEC})(?P<exp>[eE][-+]?\d+)?             # "42", "1,234.5", "1.5e3"
    )
    (?P<pct>[ \t]*(?:\\?%|percent\b))?
    """,
    re.VERBOSE,
)

_CHAR_FIXES = str.maketrans(
    {
        "\u2212": "-",  # MINUS SIGN, as in typeset or rendered-LaTeX text
        "\ufe63": "-",  # SMALL HYPHEN-MINUS
        "\uff0d": "-",  # FULLWIDTH HYPHEN-MINUS
        "\u2044": "/",  # FRACTION SLASH, as in NFKC's "1⁄2"
        "\u00a0": " ",  # no-break space
    }
)

# LaTeX rewrites applied before tokenising, in order.
_LATEX_REWRITES: tuple[tuple[re.Pattern[str], str], ...] = (
    # thin/negative spaces inside a number: "1\,000" -> "1000"
    (re.compile(r"(?<=\d)\\[,!;:](?=\d)"), ""),
    (re.compile(r"\\[,!;: ]"), " "),
    (re.compile(r"\{,\}"), ","),  # "1{,}234" is how LaTeX typesets a thousands comma
    (re.compile(r"\\%"), "%"),
    (re.compile(r"\\?\$"), ""),  # currency and math delimiters
    # "1.5 \times 10^{3}" -> "1.5e3", so it parses as scientific notation
    (
        re.compile(r"(\d)\s*(?:\\times|\\cdot|×)\s*10\s*\^\s*\{?\s*([-+]?\d+)\s*\}?"),
        r"\1e\2",
    ),
    # exponents on units are not numbers: "42 m^2", "\text{cm}^{3}" -> "42 m", "\text{cm}"
    (re.compile(r"(?<=[A-Za-z}])\^\s*\{?\s*[-+]?\d+\s*\}?"), ""),
    # "\frac{3}{4}", "\dfrac", "\tfrac" -> " 3/4": the leading space makes "2\frac12" a mixed
    # number; a minus in front is moved past that space so "-\frac{3}{4}" stays negative.
    (
        re.compile(r"(?:(-)\s*)?\\[dt]?frac\s*\{\s*([^{}]*?)\s*\}\s*\{\s*([^{}]*?)\s*\}"),
        r" \1\2/\3",
    ),
    (re.compile(r"(?:(-)\s*)?\\[dt]?frac\s*(\d)\s*(\d)"), r" \1\2/\3"),
    # "\text{ apples}" -> " apples "
    (
        re.compile(r"\\(?:text|textbf|textrm|mathrm|mathbf|mbox|operatorname)\s*\{([^{}]*)\}"),
        r" \1 ",
    ),
    (re.compile(r"\\(?:left|right)\b"), ""),
)


def _normalize_numeric_text(text: str) -> str:
    """Return ``text`` with unicode and LaTeX number spellings rewritten to plain ASCII forms."""
    # Vulgar fractions first: NFKC turns "2½" into "21⁄2", which would read as 21/2.
    text = "".join(
        " " + unicodedata.normalize("NFKC", ch)
        if unicodedata.decomposition(ch).startswith("<fraction>")
        else ch
        for ch in text
    )
    text = text.translate(_CHAR_FIXES)
    for pattern, replacement in _LATEX_REWRITES:
        text = pattern.sub(replacement, text)
    return text


def _fraction(s: str) -> Fraction:
    """Return ``s`` (an unsigned decimal, maybe with thousands commas) as an exact Fraction."""
    return Fraction(s.replace(",", ""))


class _NumberToken(NamedTuple):
    text: str  # the token as it appears after normalisation, percent sign included
    value: Fraction | float
    percent: bool


def _token_value(match: re.Match[str]) -> Fraction | float | None:
    """Return the value of one ``_NUMBER_RE`` match, or None if it is not a number (``1/0``)."""
    negative = match.group("sign") == "-"
    if match.group("whole") is not None:
        num, den = int(match.group("mnum")), int(match.group("mden"))
        if den == 0:
            return None
        if num >= den:
            # "3 5/4" is not a mixed number; the last number-like token is the fraction.
            return Fraction(num, den)
        value: Fraction | float = int(match.group("whole")) + Fraction(num, den)
    elif match.group("fnum") is not None:
        den_value = _fraction(match.group("fden"))
        if den_value == 0:
            return None
        value = _fraction(match.group("fnum")) / den_value
    elif match.group("exp") is not None:
        # Scientific notation is the one float: it is how very large/small values are written.
        value = float(match.group("dec").replace(",", "") + match.group("exp"))
    else:
        value = _fraction(match.group("dec"))
    return -value if negative else value


def _last_number(text: str) -> _NumberToken | None:
    """Return the last valid number token in ``text``, or None."""
    normalized = _normalize_numeric_text(text)
    for match in reversed(list(_NUMBER_RE.finditer(normalized))):
        try:
            value = _token_value(match)
        except ValueError:
            # Python refuses int() of over 4300 digits; such a token is degenerate output.
            value = None
        if value is not None:
            return _NumberToken(match.group(0).strip(), value, match.group("pct") is not None)
    return None


def extract_answer(text: str, *, fallback_last_number: bool = True) -> str | None:
    """Return the answer string in ``text``: the explicit final answer, else the last number.

    Args:
        text: a model reply.
        fallback_last_number: when no explicit final answer (see :func:`extract_final_answer`)
            exists, return the last number-like token of ``text`` (normalised, e.g. ``"-3/4"``
            for ``-\\frac{3}{4}``, percent sign kept); when False, return None instead.

    Returns:
        ``str`` or None when nothing is found.
    """
    answer = extract_final_answer(text)
    if answer is not None or not fallback_last_number:
        return answer
    token = _last_number(text)
    return token.text if token is not None else None


def parse_number(text: str) -> Fraction | float | None:
    """Return the number written in an answer string: a ``Fraction``, a ``float``, or None.

    The *last* number-like token wins, so words around it are ignored
    (``"The answer is 42 apples"`` -> 42, ``"x = 42"`` -> 42). Understood spellings:
    integers and decimals (``"42"``, ``"-3"``, ``"0.5"``, ``".5"``, ``"42."``), thousands
    commas in groups of three (``"1,234,567"``; ``"1,2"`` is the two numbers 1 and 2, so 2),
    currency (``"$1,200.50"``, ``"\\$42"``), fractions (``"3/4"``, ``\\frac{3}{4}``,
    ``\\dfrac``, ``\\tfrac``, ``"½"``), mixed numbers (``"2 1/2"``), the unicode minus
    (``"−5"``), scientific notation (``"1.5e3"``, ``1.5 \\times 10^{3}``) and percents
    (``"15%"`` -> 15; see :func:`is_percent`). A ``-`` right after a digit or letter is read as
    subtraction, not a sign (``"5-3"`` -> 3). Powers are not evaluated, and unit exponents
    (``"m^2"``) are dropped.

    Returns:
        An exact ``Fraction`` for integers, decimals and fractions; a ``float`` only for
        scientific notation; None if there is no number.
    """
    token = _last_number(text)
    return token.value if token is not None else None


def is_percent(text: str) -> bool:
    """Return whether the number :func:`parse_number` reads from ``text`` is a percent.

    True for ``"15%"``, ``"15 %"``, ``"15\\%"`` and ``"15 percent"``; False when there is no
    number.
    """
    token = _last_number(text)
    return token is not None and token.percent


def _close(a: Fraction | float, b: Fraction | float, rel_tol: float, abs_tol: float) -> bool:
    """Return whether ``a`` and ``b`` are equal within the tolerances (as ``math.isclose``)."""
    if any(isinstance(x, float) and not math.isfinite(x) for x in (a, b)):
        return a == b  # inf/nan from scientific notation such as "1e400"
    # Compare as Fractions: exact, and no OverflowError for huge values.
    a, b = Fraction(a), Fraction(b)
    tolerance = max(Fraction(rel_tol) * max(abs(a), abs(b)), Fraction(abs_tol))
    return abs(a - b) <= tolerance


def _readings(text: str, percent_equivalence: bool) -> list[Fraction | float]:
    """Return the values ``text`` may mean: the number, plus number/100 if it is a percent."""
    token = _last_number(text)
    if token is None:
        return []
    if percent_equivalence and token.percent:
        return [token.value, token.value / 100]
    return [token.value]


def numbers_match(
    pred: str | None,
    gold: str,
    *,
    rel_tol: float = 1e-4,
    abs_tol: float = 1e-6,
    percent_equivalence: bool = True,
) -> bool:
    """Return whether the predicted and gold answer strings hold the same number (``bool``).

    Both are read with :func:`parse_number`; they match when
    ``|p - g| <= max(rel_tol * max(|p|, |g|), abs_tol)`` (as :func:`math.isclose`), so with the
    default ``rel_tol=1e-4`` ``"100.005"`` matches ``"100"`` but ``"100.02"`` does not.

    With ``percent_equivalence``, a side written as a percent may also be read divided by 100:
    ``"15%"`` matches gold ``"15"`` and gold ``"0.15"`` (models write either), and symmetrically
    for a percent gold. A None or unparseable side gives False. A non-``str`` gold (``42``) is
    converted with ``str``.
    """
    if pred is None:
        return False
    if not isinstance(gold, str):
        gold = str(gold)
    pred_values = _readings(pred, percent_equivalence)
    gold_values = _readings(gold, percent_equivalence)
    return any(_close(p, g, rel_tol, abs_tol) for p in pred_values for g in gold_values)


def numeric_answer_reward(
    text: str,
    gold: str,
    *,
    rel_tol: float = 1e-4,
    abs_tol: float = 1e-6,
    percent_equivalence: bool = True,
) -> float:
    """Return 1.0 if the answer extracted from ``text`` matches ``gold`` numerically, else 0.0.

    The answer is :func:`extract_answer` (explicit final answer, else the last number); the
    keyword arguments are passed to :func:`numbers_match`.
    """
    answer = extract_answer(text)
    matched = numbers_match(
        answer,
        gold,
        rel_tol=rel_tol,
        abs_tol=abs_tol,
        percent_equivalence=percent_equivalence,
    )
    return 1.0 if matched else 0.0
