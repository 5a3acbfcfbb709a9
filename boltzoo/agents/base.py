"""The Policy protocol: many pending turns in, one action per turn out.

A policy is batched by design: a rollout gathers every pending turn of many envs and calls each
policy once with all of its turns. A :class:`Turn` carries the acting agent, its observation and
the env it comes from; model policies read only the observation, scripted ones (oracles) may read
the env's task through ``turn.env``. Plain functions ``observation -> str`` are policies too,
through :func:`as_policy`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from boltzoo.episode import Completion


@dataclass
class Turn:
    """One pending LLM call: ``agent`` of ``env`` must act on ``observation``."""

    agent: str
    observation: dict[str, Any]
    env: Any = None  # the env's unwrapped AEC env; scripted policies read tasks from it
    # called with each response token id and its logprob as it is sampled (the gateway streams
    # them); a policy that cannot stream leaves it uncalled
    stream: Callable[[int, float | None], None] | None = None


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


@runtime_checkable
class Policy(Protocol):
    """Anything that maps a batch of turns to one action (text or Completion) per turn."""

    def act(self, turns: Sequence[Turn]) -> list[str | Completion]:
        """Return one action per turn, in order."""
        ...


class FunctionPolicy:
    """A policy made of a function ``observation -> str | Completion``, called once per turn."""

    def __init__(self, fn: Callable[[dict[str, Any]], str | Completion], name: str | None = None):
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "function")

    def act(self, turns: Sequence[Turn]) -> list[str | Completion]:
        """Return ``fn(turn.observation)`` for every turn."""
        return [self.fn(turn.observation) for turn in turns]

    def __repr__(self) -> str:
        return f"FunctionPolicy({self.name})"


def as_policy(policy: Policy | Callable[[dict[str, Any]], str | Completion]) -> Policy:
    """Return ``policy`` itself if it has ``act``, else wrap a plain function as a policy."""
    if isinstance(policy, Policy):
        return policy
    if callable(policy):
        return FunctionPolicy(policy)
    raise TypeError(
        f"a policy needs an act(turns) method or must be a function of the observation, got "
        f"{type(policy).__name__}"
    )
