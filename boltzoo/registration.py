"""The env registry: ``boltzoo.make``, ``boltzoo.make_gym``, and the same ids in PettingZoo's
and Gymnasium's registries (``pettingzoo.make("aec", "boltzoo/math-v0")``,
``gymnasium.make("boltzoo/math-v0", agent="solver")``).
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium
import pettingzoo
from pettingzoo import AECEnv

from boltzoo.errors import UnknownEnvError, shorten

# env id -> the module that holds the env (``raw_env`` and ``env()``)
ENV_MODULES: dict[str, str] = {
    "boltzoo/math-v0": "boltzoo.envs.math_v0",
    "boltzoo/sql-v0": "boltzoo.envs.sql_v0",
    "boltzoo/rag-v0": "boltzoo.envs.rag_v0",
    "boltzoo/tokens-v0": "boltzoo.envs.tokens_v0",
    "boltzoo/prompts-v0": "boltzoo.envs.prompts_v0",
}


def registered_envs() -> list[str]:
    """Return the ids of every boltzoo env."""
    return sorted(ENV_MODULES)


def resolve_env_id(env_id: str) -> str:
    """Return the full registered id for ``env_id`` (``"math-v0"`` means ``"boltzoo/math-v0"``)."""
    if env_id in ENV_MODULES:
        return env_id
    if isinstance(env_id, str) and f"boltzoo/{env_id}" in ENV_MODULES:
        return f"boltzoo/{env_id}"
    close = difflib.get_close_matches(str(env_id), registered_envs(), n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise UnknownEnvError(
        f"no boltzoo env {shorten(env_id)}; registered: {', '.join(registered_envs())}.{hint}"
    )


def make(env_id: str, **kwargs: Any) -> AECEnv:
    """Return a new env (a PettingZoo AEC env) for ``env_id``, created with ``kwargs``."""
    module = importlib.import_module(ENV_MODULES[resolve_env_id(env_id)])
    return module.env(**kwargs)


def make_gym(
    env_id: str,
    agent: str | None = None,
    policies: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> gymnasium.Env:
    """Return one agent of ``env_id`` as a ``gymnasium.Env``; ``policies`` act for the others.

    ``agent`` may be left out when the workflow has one agent. ``kwargs`` go to the env.
    """
    from boltzoo.envs.single_agent import SingleAgentEnv

    aec_env = make(env_id, **kwargs)
    if agent is None:
        agents = aec_env.unwrapped.possible_agents
        if len(agents) != 1:
            raise ValueError(f"this workflow has agents {agents}: say which one with agent=...")
        agent = agents[0]
    return SingleAgentEnv(aec_env, agent=agent, policies=policies)


def _entry_point(env_id: str) -> Callable[..., AECEnv]:
    def create(**kwargs: Any) -> AECEnv:
        return make(env_id, **kwargs)

    create.__name__ = f"make_{env_id.split('/')[-1].replace('-', '_')}"
    return create


def register_envs() -> None:
    """Register every boltzoo env id with PettingZoo ("aec") and Gymnasium (single-agent view)."""
    for env_id in ENV_MODULES:
        if env_id not in pettingzoo.aec_registry:
            pettingzoo.register("aec", env_id, entry_point=_entry_point(env_id))
        if env_id not in gymnasium.registry:
            gymnasium.register(
                id=env_id, entry_point="boltzoo.registration:make_gym", kwargs={"env_id": env_id}
            )
