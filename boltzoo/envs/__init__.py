"""The task environments, their contract (:class:`BoltzooEnv`, checked by :func:`check_env`) and
:class:`TaskEnv`, an env from rows of tasks, reward functions and tools."""

from boltzoo.envs.base import LLMTurnEnv, ToolSpec
from boltzoo.envs.contract import BoltzooEnv, EnvCheckError, check_env
from boltzoo.envs.task_env import RewardFunctionError, Task, TaskEnv

__all__ = [
    "BoltzooEnv",
    "EnvCheckError",
    "LLMTurnEnv",
    "RewardFunctionError",
    "Task",
    "TaskEnv",
    "ToolSpec",
    "check_env",
]
