r"""tokens-v0: write tokens from a hidden target set (a sanity check for RL pipelines).

| | |
|---|---|
| Creation | ``boltzoo.make("boltzoo/tokens-v0", vocab_size=...)`` (or ``pettingzoo.make``) |
| Agents | ``writer`` |
| API | AEC (one turn) |
| Action | a ``Completion`` with ``response_token_ids`` (a ``str`` is accepted and scores 0) |
| Observation | ``{"agent", "task_id", "messages"}``: a one-line system message and a prompt |
| Single-agent view | ``boltzoo.make_gym("boltzoo/tokens-v0", vocab_size=...)`` |

Create it with every argument at its default::

    env = boltzoo.make("boltzoo/tokens-v0", vocab_size=49152, target_size=300, target_seed=0,
                       num_tasks=64, split="train", max_turns=1, tool_reward=0.0)

In the spirit of Gymnasium's toy envs, tokens-v0 checks that a learner learns, not that a model
can do a task. The reward is the fraction of the response's tokens that belong to a fixed target
set of token ids, so even a tiny randomly initialised model earns it from the start (random
tokens land in the set at a rate of about ``target_size / vocab_size``), and a working RL
pipeline must raise it within a few updates. The prompt does not matter to the reward.

## Agents and actions

``writer`` sees a system message that explains the game in one line and a short prompt
(``"Write something. (i)"``), and writes once; the episode always ends after that one turn.
The env scores the action's token ids, so the action must be a :class:`~boltzoo.Completion`
with ``response_token_ids``, as every model policy returns. A plain ``str``, or a Completion
without token ids, is accepted (never an error) and scores 0, with ``info["note"]`` saying why.

## Rewards and infos

The task reward, paid to every agent (the writer) at the end of its turn: the fraction of
``response_token_ids`` that are in the target set (0.0 for an empty response). Every response
token counts, an end-of-sequence token included. ``success`` is ``score >= 0.5``. ``infos`` hold
``score``, ``success``, ``target_fraction`` (the same as ``score``), ``response_tokens`` (how
many token ids were scored; 0 for an action without ids) and ``target_hits`` (how many of them
are in the set). ``tool_reward`` is accepted for a uniform interface; tokens-v0 has no tools.

The target set is ``numpy.random.default_rng(target_seed).choice(vocab_size, size=target_size,
replace=False)``, also exposed as ``env.unwrapped.target_token_ids`` (a frozenset of ints).
``oracle_action`` writes 8 target ids (score 1.0); ``naive_action`` writes 8 ids outside the set
(score 0.0).

## Arguments

* ``vocab_size``: the size of the policy's vocabulary (``len(tokenizer)``); target ids are drawn
  from ``range(vocab_size)``. Default 49,152, SmolLM2's tokenizer (boltzoo's bundled model):
  set it to your model's.
* ``target_size``: how many token ids the target set holds (default 300; 1 to ``vocab_size``).
* ``target_seed``: the seed of the target set (default 0): the same seed, the same set.
* ``num_tasks``: how many prompts (default 64); they differ only by their number.
* ``split``: ``"train"`` (default) or ``"test"``, accepted for a uniform interface with the
  other envs; both hold the same prompts (the prompt plays no part in the reward).
* ``max_turns`` (default 1; the episode ends after one turn whatever it is), ``tool_reward``,
  ``tool_reward_on_success``, ``prompts`` (``{"writer": ...}``), ``render_mode`` (``"ansi"`` /
  ``"human"``), ``max_action_chars`` (cuts the text only; token ids are scored as given).

## Version history

* v0: first version.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from boltzoo.envs.base import DEFAULT_MAX_ACTION_CHARS, LLMTurnEnv, OrderEnforcing
from boltzoo.episode import Completion
from boltzoo.errors import DatasetError

WRITER = "writer"
SMOLLM2_VOCAB_SIZE = 49152
SUCCESS_THRESHOLD = 0.5
SCRIPTED_TOKENS = 8  # response length of oracle_action and naive_action

SYSTEM_PROMPT = (
    "Write anything: your score is the fraction of your tokens that belong to a hidden set."
)
NO_TOKEN_IDS_NOTE = (
    "tokens-v0 scores token ids and this action had none (a str, or a Completion without "
    "response_token_ids): scored 0; use a model policy"
)


@dataclass(frozen=True)
class TokenTask:
    """One tokens-v0 prompt."""

    task_id: str
    prompt: str


def make_tasks(num_tasks: int) -> list[TokenTask]:
    """Return ``num_tasks`` prompts, ``"Write something. (i)"``."""
    return [TokenTask(f"tokens-{i}", f"Write something. ({i})") for i in range(num_tasks)]


def target_set(vocab_size: int, target_size: int, target_seed: int) -> frozenset[int]:
    """Return the target token ids: ``target_size`` distinct ids of ``range(vocab_size)``."""
    ids = np.random.default_rng(target_seed).choice(vocab_size, size=target_size, replace=False)
    return frozenset(int(i) for i in ids)


class raw_env(LLMTurnEnv):
    """tokens-v0 as a raw AEC env (``env()`` adds PettingZoo's order-enforcing wrapper)."""

    metadata = {"render_modes": ["ansi", "human"], "name": "tokens_v0", "is_parallelizable": False}
    env_id = "boltzoo/tokens-v0"
    agent_variants = ((WRITER,),)
    default_prompts = {WRITER: SYSTEM_PROMPT}

    def __init__(
        self,
        *,
        vocab_size: int = SMOLLM2_VOCAB_SIZE,
        target_size: int = 300,
        target_seed: int = 0,
        num_tasks: int = 64,
        split: str = "train",
        max_turns: int = 1,
        render_mode: str | None = None,
        max_action_chars: int = DEFAULT_MAX_ACTION_CHARS,
        tool_reward: float = 0.0,
        tool_reward_on_success: bool = False,
        prompts: dict[str, str] | None = None,
    ):
        super().__init__(
            agents=(WRITER,),
            max_turns=max_turns,
            render_mode=render_mode,
            max_action_chars=max_action_chars,
            tool_reward=tool_reward,
            tool_reward_on_success=tool_reward_on_success,
            prompts=prompts,
        )
        for name, value in (("vocab_size", vocab_size), ("target_size", target_size)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise TypeError(f"{name} must be an int, got {value!r}")
        if vocab_size < 1:
            raise ValueError(f"vocab_size must be at least 1, got {vocab_size}")
        if not 1 <= target_size <= vocab_size:
            raise ValueError(
                f"target_size must be between 1 and vocab_size={vocab_size}, got {target_size}"
            )
        if num_tasks < 1:
            raise ValueError(f"num_tasks must be at least 1, got {num_tasks}")
        if split not in ("train", "test"):
            raise DatasetError(f"tokens-v0 has the splits 'train' and 'test'; got split={split!r}")
        self.vocab_size = int(vocab_size)
        self.target_size = int(target_size)
        self.target_seed = int(target_seed)
        self.split = split
        self.target_token_ids: frozenset[int] = target_set(
            self.vocab_size, self.target_size, self.target_seed
        )
        self.tasks: list[TokenTask] = make_tasks(int(num_tasks))
        self._action: Any = None  # the action being stepped (_play only receives its text)

    # --- episode state ---------------------------------------------------------------------

    def step(self, action: str | Completion | None) -> None:
        """Score the writer's action (its token ids) and end the episode."""
        self._action = action
        try:
            super().step(action)
        finally:
            self._action = None

    def _start_episode(self) -> str:
        self._chat = [
            {"role": "system", "content": self.prompts[WRITER]},
            {"role": "user", "content": self.current_task.prompt},
        ]
        return WRITER

    def _messages(self, agent: str) -> list[dict[str, str]]:
        return self._chat

    def _play(self, agent: str, text: str) -> None:
        action = self._action
        token_ids = action.response_token_ids if isinstance(action, Completion) else None
        hits = 0 if token_ids is None else sum(int(t) in self.target_token_ids for t in token_ids)
        score = hits / len(token_ids) if token_ids else 0.0
        self._finish(score=score, success=score >= SUCCESS_THRESHOLD, reward=score)
        for a in self.agents:
            info = self.infos[a]
            info.update(
                target_fraction=score,
                response_tokens=0 if token_ids is None else len(token_ids),
                target_hits=hits,
            )
            if token_ids is None:
                info["note"] = NO_TOKEN_IDS_NOTE
        return None

    # --- scripted policies (tests and baselines) -------------------------------------------

    def oracle_action(self, agent: str) -> Completion:
        """Return a Completion of the 8 smallest target ids (scores 1.0)."""
        ids = sorted(self.target_token_ids)[:SCRIPTED_TOKENS]
        return Completion(text="", response_token_ids=ids)

    def naive_action(self, agent: str) -> Completion:
        """Return a Completion of the 8 smallest ids outside the target set (scores 0.0)."""
        ids = []
        for token_id in range(self.vocab_size):
            if len(ids) == SCRIPTED_TOKENS:
                break
            if token_id not in self.target_token_ids:
                ids.append(token_id)
        return Completion(text="", response_token_ids=ids)


def env(**kwargs: Any) -> OrderEnforcing:
    """Return tokens-v0 wrapped as PettingZoo wraps its own envs (order enforcing)."""
    return OrderEnforcing(raw_env(**kwargs))
