"""Scripted policies: an oracle that knows the gold answer, and a naive baseline.

Both ask the env (``turn.env``, the unwrapped env) for the action, through the env's
``oracle_action(agent)`` / ``naive_action(agent)``: the oracle reads the current task's gold data
there, never from observations. They are for tests, sanity checks and baselines.
"""

from __future__ import annotations

from collections.abc import Sequence

from boltzoo.agents.base import Turn


class _EnvScriptedPolicy:
    method = ""

    def act(self, turns: Sequence[Turn]) -> list[str]:
        """Return the env's scripted action for each turn's agent."""
        actions = []
        for turn in turns:
            if turn.env is None:
                raise ValueError(f"{type(self).__name__} needs turn.env, the env that asks")
            actions.append(getattr(turn.env.unwrapped, self.method)(turn.agent))
        return actions

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class OraclePolicy(_EnvScriptedPolicy):
    """Acts as an agent that knows the task's gold answer (scores 1.0 on every task)."""

    method = "oracle_action"


class NaivePolicy(_EnvScriptedPolicy):
    """Acts as a simple baseline that does not know the answer."""

    method = "naive_action"


SCRIPTED_POLICIES = {"oracle": OraclePolicy, "naive": NaivePolicy}
