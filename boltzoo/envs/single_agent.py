"""One agent of a multi-agent env seen as a ``gymnasium.Env``; given policies drive the others.

A thin layer outside the env (as Gymnasium keeps wrappers outside ``Env``): ``reset`` and ``step``
run the other agents' turns with their policies until it is this agent's turn again, or the
episode ends. The reward ``step`` returns is everything paid to this agent since its last action
(the team reward included), as PettingZoo's ``last()`` accumulates it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium
from pettingzoo import AECEnv

from boltzoo.episode import Completion
from boltzoo.errors import UnknownAgentError
from boltzoo.policy import Policy, Turn, as_policy


class SingleAgentEnv(gymnasium.Env):
    """``agent`` of ``aec_env`` as a Gymnasium env; ``policies`` act for every other agent."""

    metadata = {"render_modes": ["ansi", "human"]}

    def __init__(
        self,
        aec_env: AECEnv,
        agent: str,
        policies: Mapping[str, Policy | Callable[[dict[str, Any]], str | Completion]] | None = None,
    ):
        self.aec_env = aec_env
        raw = aec_env.unwrapped
        if agent not in raw.possible_agents:
            raise UnknownAgentError(
                f"{raw.env_id} has no agent {agent!r} in this workflow; its agents are "
                f"{raw.possible_agents}"
            )
        policies = dict(policies or {})
        others = [a for a in raw.possible_agents if a != agent]
        missing = [a for a in others if a not in policies]
        if missing:
            raise ValueError(
                f"the single-agent view of {agent!r} needs policies for the other agents: pass "
                f"policies={{{', '.join(repr(a) + ': ...' for a in missing)}}}"
            )
        unknown = [a for a in policies if a not in others]
        if unknown:
            raise UnknownAgentError(
                f"policies given for {unknown}, which are not other agents of this workflow "
                f"({others})"
            )
        self.agent = agent
        self.policies = {a: as_policy(p) for a, p in policies.items()}
        self.observation_space = raw.observation_space(agent)
        self.action_space = raw.action_space(agent)
        self.render_mode = raw.render_mode
        self.metadata = {"render_modes": list(raw.metadata["render_modes"])}

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Start an episode (as the AEC env's ``reset``); return this agent's first observation."""
        super().reset(seed=seed)
        self.aec_env.reset(seed=seed, options=options)
        observation, _, _, _, info = self._play_others()
        return observation, info

    def step(self, action: str | Completion) -> tuple[dict[str, Any], float, bool, bool, dict]:
        """Act for this agent, let the others act; return ``(obs, reward, term, trunc, info)``."""
        self.aec_env.step(action)
        return self._play_others()

    def _play_others(self) -> tuple[dict[str, Any], float, bool, bool, dict]:
        env = self.aec_env
        while True:
            current = env.agent_selection
            observation, reward, terminated, truncated, info = env.last()
            if current == self.agent:
                return observation, float(reward), terminated, truncated, copy.deepcopy(info)
            if terminated or truncated:
                env.step(None)  # PettingZoo's dead step for the other agents
                continue
            turn = Turn(agent=current, observation=observation, env=env.unwrapped)
            env.step(self.policies[current].act([turn])[0])

    def render(self) -> str | None:
        """Render the underlying env's transcript."""
        return self.aec_env.render()

    def close(self) -> None:
        """Close the underlying env."""
        self.aec_env.close()
