"""boltzoo: multi-agent LLM workflows as PettingZoo environments, and LightningRL to train them.

import boltzoo
env = boltzoo.make("boltzoo/math-v0")
env.reset(seed=0)
for agent in env.agent_iter():
    obs, reward, term, trunc, info = env.last()
    env.step(None if term or trunc else my_llm(obs))
"""

from boltzoo.episode import Completion, Episode, Step, load_episodes, save_episodes
from boltzoo.registration import make, make_gym, register, register_envs, registered_envs
from boltzoo.rollout import rollout

__version__ = "0.1.0"

register_envs()

__all__ = [
    "Completion",
    "Episode",
    "Step",
    "__version__",
    "load_episodes",
    "make",
    "make_gym",
    "register",
    "register_envs",
    "registered_envs",
    "rollout",
    "save_episodes",
]
