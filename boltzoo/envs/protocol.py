"""Parsers for the text protocols agents speak inside envs: verdicts and SQL in replies.

Lenient on purpose: a small model's reply rarely follows a format to the letter, and an
unparseable reply must still lead somewhere documented.
"""

from __future__ import annotations

import re

# One line each: "VERDICT: INCORRECT - reason" (markdown bold and other separators tolerated).
_VERDICT_LINE = re.compile(
    r"verdict[ \t]*\**[ \t]*[:=]?[ \t]*\**[ \t]*(in)?correct\b\**[ \t]*[-:,.]?[ \t]*(.*)", re.I
)
_NEGATIVE_WORDS = re.compile(r"\b(incorrect|wrong|not correct|mistake)\b", re.I)


def parse_verdict(text: str) -> tuple[bool, str]:
    """Return ``(accepted, reason)`` from a verifier's text, leniently.

    The last ``VERDICT: CORRECT`` / ``VERDICT: INCORRECT - reason`` line wins; without one, the
    words "incorrect", "wrong", "not correct" or "mistake" mean rejected (the whole text is the
    reason); anything else, unparseable text included, means accepted.
    """
    verdicts = _VERDICT_LINE.findall(text)
    if verdicts:
        negated, reason = verdicts[-1]
        return (not negated), reason.strip()
    if _NEGATIVE_WORDS.search(text):
        return False, text.strip()[:500]
    return True, ""


_SQL_FENCE = re.compile(r"```[ \t]*(?:sql|sqlite|postgresql)?[ \t]*\n?(.*?)(?:```|$)", re.I | re.S)
_SQL_START = re.compile(r"\b(with|select)\b", re.I)


def extract_sql(text: str) -> str:
    """Return the SQL query in an agent's reply.

    The last fenced code block (```sql ... ```, an unclosed fence running to the end) wins;
    without one, the text from the first ``SELECT`` or ``WITH`` on; without that, the whole
    text. Surrounding white space and trailing semicolons are stripped.
    """
    blocks = [b for b in _SQL_FENCE.findall(text) if b.strip()]
    if blocks:
        sql = blocks[-1]
    else:
        start = _SQL_START.search(text)
        sql = text[start.start() :] if start else text
    return sql.strip().rstrip(";").strip()


def tagged_calls(text: str, tag: str) -> list[tuple[int, int, str]]:
    """Return ``(start, end, content)`` of every closed ``<tag>...</tag>`` in ``text``, in order.

    ``start``/``end`` bound the whole call, tags included; the content is stripped; tags may
    span lines; an unclosed tag ends the search. One pass with ``str.find``: a lazy regex
    rescans the rest of the text from every unclosed tag (33,333 of them took a minute).
    """
    opening, closing = f"<{tag}>", f"</{tag}>"
    calls, start = [], 0
    while (opened := text.find(opening, start)) >= 0:
        closed = text.find(closing, opened + len(opening))
        if closed < 0:
            break
        start = closed + len(closing)
        calls.append((opened, start, text[opened + len(opening) : closed].strip()))
    return calls
