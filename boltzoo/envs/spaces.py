"""Gymnasium spaces for LLM turns: free text, and a list of chat messages.

Gymnasium's own ``Text`` space rejects spaces with its default charset and non-ASCII with
``string.printable``, and ``Sequence`` wants tuples; a model writes any Unicode, and chat
messages are lists of dicts. These two small spaces accept exactly what an LLM turn carries, and
``sample()`` draws Unicode text (accents, CJK, emoji, right-to-left, combining and zero-width
characters, control characters) so that conformance tests exercise it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.spaces import Space

CHAT_ROLES = ("system", "user", "assistant", "tool")

# What sample() draws from: the text a model may write, not only what a keyboard types.
_SAMPLE_ALPHABET = (
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    " \n\t.,;:!?'\"()[]{}<>/\\|+-*=%$#@&^_~`"
    "éüñçßøÅ"  # accented Latin
    "中文字日本語한국어"  # CJK
    "😀🚀💥👩‍💻"  # emoji, one with a zero-width joiner
    "עברית العربية"  # right-to-left
    "e\u0301"  # a combining accent
    "\u200b\u200e\ufeff"  # zero-width space, LTR mark, BOM
    "\x00\x07\x1b"  # control characters
)


class TextSpace(Space[str]):
    """Any ``str`` of at most ``max_length`` characters (code points)."""

    def __init__(self, max_length: int = 1_000_000, seed: int | np.random.Generator | None = None):
        self.max_length = int(max_length)
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        """Return False: text has no fixed-size numeric form."""
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        """Return a random Unicode string of up to 64 characters."""
        length = int(self.np_random.integers(0, min(64, self.max_length) + 1))
        picks = self.np_random.integers(0, len(_SAMPLE_ALPHABET), size=length)
        return "".join(_SAMPLE_ALPHABET[i] for i in picks)

    def contains(self, x: Any) -> bool:
        """Return whether ``x`` is a ``str`` within the length limit."""
        return isinstance(x, str) and len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"TextSpace(max_length={self.max_length})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TextSpace) and other.max_length == self.max_length

    def __hash__(self) -> int:
        return hash(("TextSpace", self.max_length))


class ChatMessagesSpace(Space[list]):
    """A list of chat messages, each a ``dict`` with a ``role`` and a ``str`` ``content``.

    Messages may carry other keys (``name``, ``tool_call_id``); roles are those of
    :data:`CHAT_ROLES`.
    """

    def __init__(self, max_messages: int = 10_000, seed: int | np.random.Generator | None = None):
        self.max_messages = int(max_messages)
        self._text = TextSpace()
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        """Return False: a chat has no fixed-size numeric form."""
        return False

    def seed(self, seed: int | None = None) -> int | list[int] | dict[str, int]:
        """Seed this space and the text space that samples message contents."""
        seeds = super().seed(seed)
        self._text.seed(int(self.np_random.integers(2**31)))
        return seeds

    def sample(self, mask: Any = None, probability: Any = None) -> list[dict[str, str]]:
        """Return a random chat of one to three messages with Unicode contents."""
        count = int(self.np_random.integers(1, 4))
        roles = self.np_random.integers(0, len(CHAT_ROLES), size=count)
        return [{"role": CHAT_ROLES[r], "content": self._text.sample()} for r in roles]

    def contains(self, x: Any) -> bool:
        """Return whether ``x`` is a list of well-formed chat messages."""
        if not isinstance(x, list) or len(x) > self.max_messages:
            return False
        return all(
            isinstance(m, dict)
            and m.get("role") in CHAT_ROLES
            and isinstance(m.get("content"), str)
            for m in x
        )

    def __repr__(self) -> str:
        return f"ChatMessagesSpace(max_messages={self.max_messages})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ChatMessagesSpace) and other.max_messages == self.max_messages

    def __hash__(self) -> int:
        return hash(("ChatMessagesSpace", self.max_messages))
