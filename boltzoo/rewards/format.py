"""Format checks: did the reply state a final answer, and are its tool calls well formed?

These are small shaping rewards, meant to be added to a correctness reward with a small
weight so that a well-formatted wrong answer never beats a correct one.
"""

from __future__ import annotations

import re

from .math import extract_final_answer

__all__ = ["has_final_answer", "tool_calls_well_formed", "format_reward"]


def has_final_answer(text: str) -> bool:
    """Return whether ``text`` states an explicit final answer (``bool``).

    That is, :func:`boltzoo.rewards.math.extract_final_answer` finds a non-empty
    ``\\boxed{}``, ``####`` or ``Answer:``; an empty ``\\boxed{}`` does not count.
    """
    return extract_final_answer(text) is not None


def tool_calls_well_formed(text: str, tag: str = "calc") -> bool:
    """Return whether every ``<tag>...</tag>`` tool call in ``text`` is well formed (``bool``).

    Well formed means: each ``<tag>`` is closed by a later ``</tag>``, calls do not nest, no
    ``</tag>`` appears without an open call, and no call is empty (only whitespace, or a
    self-closing ``<tag/>``). Tags are matched exactly and case-sensitively. A text with no
    calls is well formed.
    """
    name = re.escape(tag)
    # One scan over opening, closing and self-closing tags, in order of appearance.
    tag_re = re.compile(rf"<(?P<close>/)?{name}\s*(?P<self>/)?>")
    open_end: int | None = None  # where the open call's body starts; None when none is open
    for match in tag_re.finditer(text):
        if match.group("self"):
            return False  # "<calc/>": a call with no expression
        if match.group("close"):
            if open_end is None:
                return False  # closing tag without an opening one
            if not text[open_end : match.start()].strip():
                return False  # "<calc> </calc>"
            open_end = None
        else:
            if open_end is not None:
                return False  # nested, or the previous call was never closed
            open_end = match.end()
    return open_end is None  # an unclosed final call is malformed


def format_reward(text: str, *, weight: float = 0.1, tag: str = "calc") -> float:
    """Return ``weight`` if ``text`` has a final answer and well-formed tool calls, else 0.0.

    See :func:`has_final_answer` and :func:`tool_calls_well_formed`; ``tag`` names the tool
    call tag (``"calc"`` for ``<calc>...</calc>``).
    """
    if has_final_answer(text) and tool_calls_well_formed(text, tag):
        return float(weight)
    return 0.0
