"""LightningRL: rollouts, credited transitions, advantages and the clipped policy-gradient loss.

Read in this order: ``rollout`` (episodes), ``transitions.flatten`` with ``credit`` (the high
level: each LLM call's share of the return), ``advantages`` (group baselines), ``loss`` (the low
level: a token-level clipped policy gradient), ``update`` (one optimiser step over a step's
calls) on the weights of ``policies``, then ``trainer`` (``Trainer`` with its
``TrainerConfig``), which runs them in a loop with checkpoints, and ``sft`` (``SFTTrainer``
with its ``SFTConfig``), the warm start on demonstrations that RL continues from.
"""

from importlib import import_module
from typing import Any

from boltzoo.lightningrl.credit import discounted, get_credit, identical, returns
from boltzoo.lightningrl.transitions import Transition, flatten, select_agents
from boltzoo.rollout import rollout

# The torch-based parts load on first use, so that `import boltzoo` stays light.
_LAZY = {
    "Trainer": "trainer",
    "TrainerConfig": "config",
    "SFTConfig": "config",
    "SFTTrainer": "sft",
    "GroupStats": "advantages",
    "compute_advantages": "advantages",
    "LossOutput": "loss",
    "policy_loss": "loss",
}

__all__ = [
    "GroupStats",
    "LossOutput",
    "SFTConfig",
    "SFTTrainer",
    "Trainer",
    "TrainerConfig",
    "Transition",
    "compute_advantages",
    "discounted",
    "flatten",
    "get_credit",
    "identical",
    "policy_loss",
    "returns",
    "rollout",
    "select_agents",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(f"boltzoo.lightningrl.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'boltzoo.lightningrl' has no attribute {name!r}")
