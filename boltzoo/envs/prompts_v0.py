r"""prompts-v0: your prompts, judged by the reward your agent reports.

| | |
|---|---|
| Creation | ``boltzoo.make("boltzoo/prompts-v0", tasks="my_tasks.jsonl")`` |
| Agents | ``agent`` |
| API | AEC (one turn) |
| Action | the answer (text) |
| Observation | ``{"agent", "task_id", "messages"}``: a system message (if any) and the prompt |
| Rewards | what the agent reports (``report_reward``; an agent program's ``POST .../reward``) |

For tasks no bundled env judges: the agent (typically an agent program, which can run its own
checks: unit tests in its own sandbox, a judge model, a user's rating) reports the reward of
its answer, and LightningRL learns from it. Every other env here judges its own tasks and takes
no reward from agents. Create it with every argument at its default::

    env = boltzoo.make("boltzoo/prompts-v0", tasks=EXAMPLE_ROWS, split="train",
                       success_at=1.0, max_turns=1, prompts=None)

Without ``tasks`` it plays ``EXAMPLE_ROWS``: the rows of ``EXAMPLE_TASKS``
(``boltzoo/envs/data/prompts_example.jsonl``) as both its ``"train"`` and its ``"test"`` split,
said so explicitly (a demonstration, not a held-out benchmark): eight small Python functions to
write, each row with the ``tests`` an agent can run itself to
judge its answer (``examples/agent_programs/judged_coder.py`` does, and reports the fraction of
tests that pass).

## Agents and actions

``agent`` sees the task's prompt as the user message (after a system message: the row's
``system``, else ``prompts["agent"]``, else none) and answers once; the episode ends after that
turn. The answer is the action.

## Rewards and infos

During its turn the agent reports (``env.unwrapped.report_reward(agent, r)``, or through the
rollout's ``POST .../reward``):

* the turn's reward (once), any finite number: paid as the team reward when the turn is played;
  ``score`` is it clipped to [0, 1], ``success`` is ``reward >= success_at``;
* optionally, rewards for single LLM calls of the turn (``call_id``: the gateway's id of the
  call): intermediate rewards, paid to the agent at the same step (the credit rules see them as
  its rewards; they change neither ``score`` nor ``success``).

A turn played without a reported turn reward ends the episode failed (``episode.failed``, its
``error`` saying why, ``score`` None): it is dropped with its group in training, never scored 0
(its agents' infos say ``success`` False, ``score`` 0.0 and the ``error``, as PettingZoo wants a
finished episode's infos). ``infos`` hold ``score``, ``success`` and ``reported_rewards``
(``{"turn": r, "calls": {id: r}}``).

## Arguments

* ``tasks``: the rows (default ``EXAMPLE_ROWS``): a JSONL (or JSON list) file, a list of
  rows, or ``{"train": ..., "test": ...}`` (the same for each split). A row is
  ``{"prompt": str}`` with optional ``id`` (default: its index) and ``system``; other fields
  are kept in ``env.unwrapped.tasks[i].row``.
* ``split``: which split of a ``{split: rows}`` mapping to play; a single list or file is the
  ``"train"`` split only (asking it for ``"test"`` is an error, never the training rows).
* ``success_at``: the reported reward that counts as a success (default 1.0).
* ``max_turns`` (default 1), ``prompts`` (``{"agent": system prompt}``), ``render_mode``,
  ``max_action_chars``.

## Version history

* v0: first version.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from boltzoo.envs.base import DEFAULT_MAX_ACTION_CHARS, LLMTurnEnv, OrderEnforcing
from boltzoo.envs.data.files import located_rows, required_text, split_source
from boltzoo.errors import DatasetError

AGENT = "agent"
EXAMPLE_TASKS = str(Path(__file__).parent / "data" / "prompts_example.jsonl")
EXAMPLE_ROWS = {"train": EXAMPLE_TASKS, "test": EXAMPLE_TASKS}  # a demonstration: no held-out set


@dataclass(frozen=True)
class PromptTask:
    """One prompt: its id, its text, an optional system message, and its whole row."""

    task_id: str
    prompt: str
    system: str | None = None
    row: dict[str, Any] = field(default_factory=dict, compare=False)


def load_prompt_tasks(tasks: Any, split: str) -> list[PromptTask]:
    """Return the tasks of ``split`` from a file, a list of rows or a ``{split: ...}`` map."""
    located = located_rows(split_source(tasks, split, "prompts-v0 tasks="), "prompts-v0 tasks")
    tasks, seen = [], set()
    for index, (where, row) in enumerate(located):
        task_id = str(row.get("id", index))
        if task_id in seen:
            raise DatasetError(f"{where}: the id {task_id!r} is used twice")
        seen.add(task_id)
        system = row.get("system")
        if system is not None and not isinstance(system, str):
            raise DatasetError(f"{where}: 'system' must be text")
        tasks.append(PromptTask(task_id, required_text(row, "prompt", where), system, row))
    if not tasks:
        raise DatasetError(f"prompts-v0: split {split!r} holds no tasks")
    return tasks


class raw_env(LLMTurnEnv):
    """prompts-v0 as a raw AEC env (``env()`` adds PettingZoo's order-enforcing wrapper)."""

    metadata = {"render_modes": ["ansi", "human"], "name": "prompts_v0", "is_parallelizable": False}
    env_id = "boltzoo/prompts-v0"
    agent_variants = ((AGENT,),)
    default_prompts = {AGENT: ""}
    accepts_agent_rewards = True

    def __init__(
        self,
        *,
        tasks: Any = EXAMPLE_ROWS,
        split: str = "train",
        success_at: float = 1.0,
        max_turns: int = 1,
        render_mode: str | None = None,
        max_action_chars: int = DEFAULT_MAX_ACTION_CHARS,
        prompts: dict[str, str] | None = None,
    ):
        super().__init__(
            agents=(AGENT,),
            max_turns=max_turns,
            render_mode=render_mode,
            max_action_chars=max_action_chars,
            prompts=prompts,
        )
        if not math.isfinite(success_at):
            raise ValueError(f"success_at must be a finite number, got {success_at}")
        self.split = split
        self.success_at = float(success_at)
        self.tasks: list[PromptTask] = load_prompt_tasks(tasks, split)

    def _start_episode(self) -> str:
        task = self.current_task
        system = task.system if task.system is not None else self.prompts[AGENT]
        self._chat = [{"role": "system", "content": system}] if system else []
        self._chat.append({"role": "user", "content": task.prompt})
        return AGENT

    def _messages(self, agent: str) -> list[dict[str, str]]:
        return self._chat

    def _play(self, agent: str, text: str) -> None:
        reported = self._reported_rewards.pop(agent, {"turn": None, "calls": {}})
        reward = reported["turn"]
        if reward is None:
            # nothing to judge by: a failed episode (dropped in training), never a silent 0
            self.episode.failed = True
            self.episode.error = (
                f"AgentRewardError: prompts-v0 task {self.current_task.task_id!r}: the agent "
                "reported no reward for its answer (report_reward, or POST .../reward from an "
                "agent program)"
            )
            for a in self.agents:
                self.terminations[a] = True
                self.infos[a].update(success=False, score=0.0, error=self.episode.error)
            self.episode.terminated = True
            return None
        self._pay(agent, sum(reported["calls"].values()))
        self._finish(
            score=min(1.0, max(0.0, reward)), success=reward >= self.success_at, reward=reward
        )
        self.infos[agent]["reported_rewards"] = reported
        return None


def env(**kwargs: Any) -> OrderEnforcing:
    """Return prompts-v0 wrapped as PettingZoo wraps its own envs (order enforcing)."""
    return OrderEnforcing(raw_env(**kwargs))
