"""What model policies share: sampling parameters, chat encoding. The Policy protocol itself
(:class:`Turn`, :class:`Policy`, :func:`as_policy`) lives in :mod:`boltzoo.policy`, beside the
episode, and is re-exported here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from boltzoo.policy import FunctionPolicy, Policy, Turn, as_policy

__all__ = [
    "FunctionPolicy", "Policy", "SamplingParams", "Turn", "as_policy", "encode_chat",
    "encode_observation",
]  # fmt: skip


@dataclass(frozen=True)
class SamplingParams:
    """How a model backend samples, named as transformers names it; recorded in Completions.

    ``stop`` strings end a response and are cut from its text (their tokens are kept).
    """

    max_new_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    stop: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        stop = (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)
        object.__setattr__(self, "stop", stop)
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be at least 1, got {self.max_new_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be 0 (greedy) or more, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")

    def to_dict(self) -> dict[str, Any]:
        """Return the parameters as plain values (what a Completion's sampling_params holds)."""
        return {
            "max_new_tokens": self.max_new_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "stop": list(self.stop),
        }


def encode_chat(tokenizer: Any, messages: Sequence[dict[str, Any]]) -> list[int]:
    """Return the prompt token ids of ``messages`` under ``tokenizer``'s chat template.

    Only ``role`` and ``content`` are passed on. Templates that know no ``tool`` role get tool
    results as user messages (``"Tool result:\n..."``).
    """
    chat = [{"role": m["role"], "content": m["content"]} for m in messages]
    try:
        encoded = tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=True)
    except Exception:
        chat = [
            {"role": "user", "content": f"Tool result:\n{m['content']}"}
            if m["role"] == "tool"
            else m
            for m in chat
        ]
        encoded = tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=True)
    return list(encoded["input_ids"] if hasattr(encoded, "keys") else encoded)


def encode_observation(tokenizer: Any, observation: dict[str, Any]) -> list[int]:
    """Return the prompt token ids of an observation: its ``prompt_token_ids`` when it gives
    them (a raw prompt, no chat template: the gateway's ``/v1/completions``), else its
    ``messages`` under the chat template."""
    if observation.get("prompt_token_ids") is not None:
        return [int(t) for t in observation["prompt_token_ids"]]
    return encode_chat(tokenizer, observation["messages"])


