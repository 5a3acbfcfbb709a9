"""Policies: the Policy protocol, model backends, and scripted policies.

Model backends import torch and transformers only when used: ``load_policy``,
``TransformersPolicy``, the ``Gateway`` and the agent programs' ``AgentCommand`` and
``AgentService`` are imported lazily.
"""

from typing import Any

from boltzoo.agents.base import FunctionPolicy, Policy, SamplingParams, Turn, as_policy
from boltzoo.agents.scripted import SCRIPTED_POLICIES, NaivePolicy, OraclePolicy, ScriptedPolicy

__all__ = [
    "SCRIPTED_POLICIES",
    "AgentCommand",
    "AgentService",
    "FunctionPolicy",
    "Gateway",
    "NaivePolicy",
    "OraclePolicy",
    "Policy",
    "SamplingParams",
    "ScriptedPolicy",
    "TransformersPolicy",
    "Turn",
    "as_policy",
    "load_policy",
]


def __getattr__(name: str) -> Any:
    if name == "load_policy":
        from boltzoo.agents.models import load_policy

        return load_policy
    if name == "Gateway":
        from boltzoo.agents.gateway import Gateway

        return Gateway
    if name in ("AgentCommand", "AgentService"):
        from boltzoo.agents import programs

        return getattr(programs, name)
    if name == "TransformersPolicy":
        from boltzoo.agents.transformers_policy import TransformersPolicy

        return TransformersPolicy
    raise AttributeError(f"module 'boltzoo.agents' has no attribute {name!r}")
