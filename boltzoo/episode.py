"""The records that cross every seam: a Completion (one LLM turn), a Step and an Episode.

Whatever produced an action (a transformers model, vLLM, a framework agent, a script), the env
keeps its :class:`Completion` untouched in the :class:`Episode` record, and the learner reads
token ids and logprobs from there; they are never re-derived from text when a backend gave them.
Both serialise to plain JSON values and back unchanged (``to_dict`` / ``from_dict``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from boltzoo.errors import DatasetError


@dataclass
class Completion:
    """What a policy returns for one turn: the text and, where the backend knows them, its tokens.

    ``logprobs`` holds one log-probability per response token, under the sampling distribution
    described by ``sampling_params``. ``inner_calls`` are the LLM calls made behind this action
    (a framework agent may call the model several times for one action). ``node`` names the
    graph node that made an inner call when one graph plays the agent as several nodes
    (LightningRL trains it as the agent of that name); None: the step's agent made it.
    ``agent_answer`` marks the final answer of an agent that called the model itself (a
    framework agent, an agent program): it is not an LLM call, even when it holds no inner calls.
    """

    text: str
    prompt_token_ids: list[int] | None = None
    response_token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    sampling_params: dict[str, Any] = field(default_factory=dict)
    model: str | None = None
    policy_version: int | None = None
    finish_reason: str | None = None
    inner_calls: list[Completion] = field(default_factory=list)
    node: str | None = None
    agent_answer: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise TypeError(f"Completion.text must be a str, got {type(self.text).__name__}")
        if self.logprobs is not None and self.response_token_ids is not None:
            if len(self.logprobs) != len(self.response_token_ids):
                raise ValueError(
                    f"Completion has {len(self.logprobs)} logprobs for "
                    f"{len(self.response_token_ids)} response tokens; they must pair one to one"
                )

    @property
    def num_prompt_tokens(self) -> int | None:
        """Return the number of prompt tokens, or None when the backend gave no token ids."""
        return None if self.prompt_token_ids is None else len(self.prompt_token_ids)

    @property
    def num_response_tokens(self) -> int | None:
        """Return the number of response tokens, or None when the backend gave no token ids."""
        return None if self.response_token_ids is None else len(self.response_token_ids)

    @property
    def has_tokens(self) -> bool:
        """Return whether the backend gave prompt and response token ids."""
        return self.prompt_token_ids is not None and self.response_token_ids is not None

    def to_dict(self) -> dict[str, Any]:
        """Return the completion as JSON-serialisable plain values (the token lists are the
        completion's own, not copies: serialise them, do not change them)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["inner_calls"] = [call.to_dict() for call in self.inner_calls]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Completion:
        """Return the completion that :meth:`to_dict` wrote."""
        data = dict(data)
        data["inner_calls"] = [cls.from_dict(c) for c in data.get("inner_calls", [])]
        return cls(**data)


@dataclass
class Step:
    """One agent turn: who acted, what it saw, what it wrote, and the rewards that followed.

    ``rewards`` maps every agent to the reward paid to it right after this step (the terminal
    team reward included, on the last step). ``info`` is the acting agent's info after the step.
    """

    agent: str
    observation: dict[str, Any]
    action: Completion
    rewards: dict[str, float]
    info: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Return the step as JSON-serialisable plain values."""
        return {
            "agent": self.agent,
            "observation": self.observation,
            "action": self.action.to_dict(),
            "rewards": dict(self.rewards),
            "info": self.info,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Step:
        """Return the step that :meth:`to_dict` wrote."""
        return cls(
            agent=data["agent"],
            observation=data["observation"],
            action=Completion.from_dict(data["action"]),
            rewards=dict(data["rewards"]),
            info=data.get("info", {}),
        )


@dataclass
class Episode:
    """The record of one run of an env on one task.

    ``final_rewards`` are the rewards paid when the episode ended (the team's task reward);
    :meth:`returns` sums every reward each agent received. ``failed`` marks an episode whose
    policy or env raised (``error`` says why); such an episode is not a sample to learn from.
    """

    episode_id: str
    env_id: str
    task_id: str
    task_index: int
    agents: list[str]
    steps: list[Step] = field(default_factory=list)
    final_rewards: dict[str, float] = field(default_factory=dict)
    score: float | None = None
    success: bool | None = None
    terminated: bool = False
    truncated: bool = False
    failed: bool = False
    error: str | None = None
    seed: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        """Return whether the episode has ended (terminated, truncated or failed)."""
        return self.terminated or self.truncated or self.failed

    def returns(self) -> dict[str, float]:
        """Return each agent's episode return: the sum of the rewards paid to it."""
        totals = {agent: 0.0 for agent in self.agents}
        for step in self.steps:
            for agent, reward in step.rewards.items():
                totals[agent] = totals.get(agent, 0.0) + reward
        return totals

    def to_dict(self) -> dict[str, Any]:
        """Return the episode as JSON-serialisable plain values (not copies: serialise them)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["steps"] = [step.to_dict() for step in self.steps]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Episode:
        """Return the episode that :meth:`to_dict` wrote."""
        data = dict(data)
        data["steps"] = [Step.from_dict(s) for s in data.get("steps", [])]
        return cls(**data)


def save_episodes(path: str | os.PathLike, episodes: Iterable[Episode]) -> Path:
    """Write ``episodes`` to a JSONL file (one episode a line, token ids included); return it.

    The file is written to a temporary name and renamed, so a reader never sees half a file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for episode in episodes:
            f.write(json.dumps(episode.to_dict(), ensure_ascii=False) + "\n")
    os.replace(tmp, path)
    return path


def load_episodes(path: str | os.PathLike) -> list[Episode]:
    """Return the episodes of a JSONL file written by :func:`save_episodes`, unchanged."""
    episodes = []
    with Path(path).open(encoding="utf-8") as f:
        for line_number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                episodes.append(Episode.from_dict(json.loads(line)))
            except (json.JSONDecodeError, TypeError, KeyError) as error:
                raise DatasetError(
                    f"{path}, line {line_number}: not an episode ({error})"
                ) from None
    return episodes
