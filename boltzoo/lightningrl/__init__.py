"""LightningRL: rollouts, and (to come) credited transitions, advantages, losses and the trainer."""

from boltzoo.lightningrl.rollout import rollout

__all__ = ["rollout"]
