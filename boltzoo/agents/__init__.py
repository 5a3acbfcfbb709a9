"""Policies: the Policy protocol, scripted policies, and (later) model backends and the gateway."""

from boltzoo.agents.base import FunctionPolicy, Policy, Turn, as_policy
from boltzoo.agents.scripted import SCRIPTED_POLICIES, NaivePolicy, OraclePolicy

__all__ = [
    "SCRIPTED_POLICIES",
    "FunctionPolicy",
    "NaivePolicy",
    "OraclePolicy",
    "Policy",
    "Turn",
    "as_policy",
]
