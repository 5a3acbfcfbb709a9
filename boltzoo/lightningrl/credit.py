"""Credit assignment: the high level of LightningRL, an episode's return shared out among calls.

Agent Lightning's hierarchy: an episode is scored once (by the env's rewards), then every LLM
call (transition) an agent made is given its share of that agent's return, and from there on each
call is a single-call RL sample. A credit rule is a function ::

    credit(episode, agent, steps) -> one credited reward per step in ``steps``

where ``steps`` are the indices (in order) of the steps at which ``agent`` acted. Every call made
within a step (a framework agent's inner calls) gets its step's credit.

Rewards: ``step.rewards[a]`` is what agent ``a`` was paid right after step ``t`` (call it
``r_t^a``); the terminal team reward sits in the last step's rewards, once for every agent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import get_args

from boltzoo.episode import Episode
from boltzoo.lightningrl.config import CreditRule

CreditFn = Callable[[Episode, str, list[int]], list[float]]


def agent_return(episode: Episode, agent: str) -> float:
    """Return the agent's episode return R_a: the sum of every reward paid to it."""
    # R_a = sum_t r_t^a   (the terminal team reward counts once: it is paid once to each agent)
    return episode.returns().get(agent, 0.0)


def identical(episode: Episode, agent: str, steps: list[int]) -> list[float]:
    """Return R_a for every one of the agent's steps (the paper's default)."""
    R = agent_return(episode, agent)
    # r_k = R_a
    return [R for _ in steps]


def discounted(gamma: float) -> CreditFn:
    """Return the rule giving the agent's k-th of n steps R_a * gamma ** (n - 1 - k)."""
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be in [0, 1], got {gamma}")

    def credit(episode: Episode, agent: str, steps: list[int]) -> list[float]:
        R = agent_return(episode, agent)
        n = len(steps)
        # r_k = gamma^(n - 1 - k) * R_a   (n - 1 - k = the agent's own turns after this one)
        return [R * gamma ** (n - 1 - k) for k in range(n)]

    credit.__name__ = credit.__qualname__ = f"discounted({gamma})"
    return credit


def returns(episode: Episode, agent: str, steps: list[int]) -> list[float]:
    """Return the agent's rewards-to-go: at step i, what it was paid at steps i, i+1, ..., end."""
    paid = [step.rewards.get(agent, 0.0) for step in episode.steps]
    to_go = [0.0] * (len(paid) + 1)
    for t in reversed(range(len(paid))):
        # G_t^a = r_t^a + G_{t+1}^a
        to_go[t] = paid[t] + to_go[t + 1]
    return [to_go[i] for i in steps]


CREDIT_RULES = get_args(CreditRule)


def get_credit(name_or_fn: str | CreditFn, gamma: float = 1.0) -> CreditFn:
    """Return the rule named ``name_or_fn`` (``gamma``: "discounted"'s), or the callable itself."""
    if callable(name_or_fn):
        return name_or_fn
    if name_or_fn == "identical":
        return identical
    if name_or_fn == "discounted":
        return discounted(gamma)
    if name_or_fn == "returns":
        return returns
    raise ValueError(
        f"unknown credit rule {name_or_fn!r}; choose one of {list(CREDIT_RULES)} or pass a "
        f"function (episode, agent, steps) -> list of rewards"
    )
