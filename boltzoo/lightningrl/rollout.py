"""Moved to :mod:`boltzoo.rollout`; these names stay importable from here."""

from boltzoo.rollout import evaluation_tasks, rollout

__all__ = ["evaluation_tasks", "rollout"]
