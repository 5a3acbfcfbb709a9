"""The Policy protocol: many pending turns in, one action per turn out.

A policy is batched by design: a rollout gathers every pending turn of many envs and calls each
policy once with all of its turns. A :class:`Turn` carries the acting agent, its observation and
the env it comes from; model policies read only the observation, scripted ones (oracles) may read
the env's task through ``turn.env``. Plain functions ``observation -> str`` are policies too,
through :func:`as_policy`. (Beside :mod:`boltzoo.episode`: what envs, rollouts and agents share.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from boltzoo.episode import Completion

__all__ = ["FunctionPolicy", "Policy", "Turn", "as_policy"]


@dataclass
class Turn:
    """One pending LLM call: ``agent`` of ``env`` must act on ``observation``."""

    agent: str
    observation: dict[str, Any]
    env: Any = None  # the env's unwrapped AEC env; scripted policies read tasks from it
    # called with each response token id and its logprob as it is sampled (the gateway streams
    # them); a policy that cannot stream leaves it uncalled
    stream: Callable[[int, float | None], None] | None = None


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
