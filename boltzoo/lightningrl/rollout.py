"""Rollout collection: many env instances at once, every pending turn batched per policy.

At each tick, every running env whose current agent is alive contributes one pending turn; the
turns are grouped by the policy that acts for their agent, and each policy is called once with
its whole batch (a model backend samples them together). Episodes end independently; a finished
env starts the next job at once, so the batch stays full.

An episode whose policy or env raised, or that ran past ``episode_timeout_s``, comes back with
``failed=True`` and the error; the others go on.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from opentelemetry.trace import Status, StatusCode
from tqdm.auto import tqdm

from boltzoo.agents.base import Policy, Turn, as_policy
from boltzoo.episode import Completion, Episode
from boltzoo.registration import make
from boltzoo.tracing import completion_attributes, span_attributes, tracer


@dataclass
class _Job:
    index: int  # position in the returned list
    seed: int
    task_index: int | None
    group: int  # index of the group of rollouts of the same task


def _plan_jobs(
    episodes: int | None, tasks: Sequence[int] | None, group_size: int, seed: int, num_tasks: int
) -> list[_Job]:
    if group_size < 1:
        raise ValueError(f"group_size must be at least 1, got {group_size}")
    if tasks is not None:
        tasks = [int(t) for t in tasks]
        if episodes is None:
            episodes = len(tasks) * group_size
    elif episodes is None:
        raise ValueError("rollout needs episodes=N, or tasks=[task indices]")
    else:
        # Without task indices, the seed draws one task per group.
        rng = np.random.default_rng(seed)
        tasks = [int(t) for t in rng.integers(num_tasks, size=-(-episodes // group_size))]
    jobs = []
    for i in range(episodes):
        group = i // group_size
        jobs.append(_Job(index=i, seed=seed + i, task_index=tasks[group % len(tasks)], group=group))
    return jobs


@dataclass
class _PolicyFailure:
    error: str


def _act(policy: Policy, turns: list[Turn]) -> list[Any]:
    actions = policy.act(turns)
    if len(actions) != len(turns):
        raise RuntimeError(f"{policy!r} returned {len(actions)} actions for {len(turns)} turns")
    return list(actions)


def _record_llm_call(
    turn: Turn, action: Any, policy: Policy, batch: int, started_ns: int, ended_ns: int
) -> None:
    """Record one turn's LLM call as a span of its episode (the batch's call times)."""
    attributes = span_attributes(
        agent=turn.agent, task_id=turn.observation.get("task_id"), policy=repr(policy), batch=batch
    )
    if isinstance(action, Completion):
        attributes.update(completion_attributes(action))
    span = tracer.start_span(
        "boltzoo.llm.call",
        context=turn.env.trace_context() if turn.env is not None else None,
        start_time=started_ns,
        attributes=attributes,
    )
    if isinstance(action, _PolicyFailure):
        span.set_status(Status(StatusCode.ERROR, action.error[:500]))
    span.end(end_time=ended_ns)


def _error_text(error: BaseException) -> str:
    where = traceback.extract_tb(error.__traceback__)
    place = f" (at {where[-1].filename}:{where[-1].lineno})" if where else ""
    return f"{type(error).__name__}: {error}{place}"


def evaluation_tasks(num_tasks: int, count: int) -> list[int]:
    """Return ``count`` task indices spread evenly over ``range(num_tasks)``, in order (every
    index when ``count >= num_tasks``): an evaluation of part of a split ordered by database or
    template samples across it, and two evaluations of the same size play the same tasks."""
    if count >= num_tasks:
        return list(range(num_tasks))
    return [i * num_tasks // count for i in range(count)]


def rollout(
    env_id: str,
    policies: Mapping[str, Policy | Callable[[dict[str, Any]], str | Completion]],
    episodes: int | None = None,
    tasks: Sequence[int] | None = None,
    group_size: int = 1,
    seed: int = 0,
    *,
    num_envs: int | None = None,
    episode_timeout_s: float | None = None,
    progress: bool = True,
    **env_kwargs: Any,
) -> list[Episode]:
    """Return the Episodes of running ``env_id`` with ``policies`` (one per agent), batched.

    Args:
        env_id: a registered env id (``"boltzoo/math-v0"`` or ``"math-v0"``).
        policies: the policy of every agent of the workflow; agents may share one policy.
        episodes: how many episodes; may be left out when ``tasks`` is given
            (then ``len(tasks) * group_size``).
        tasks: task indices of the split; each is played ``group_size`` times (GRPO groups).
            Without them, the seed draws a task per group.
        group_size: episodes per task.
        seed: episode ``i`` resets its env with ``seed + i``.
        num_envs: env instances run at once (default: all episodes at once).
        episode_timeout_s: an episode running longer is marked failed.
        progress: show a progress bar of episodes done.
        env_kwargs: passed to ``boltzoo.make``.
    """
    envs = [make(env_id, **env_kwargs)]
    raw = envs[0].unwrapped
    missing = [a for a in raw.possible_agents if a not in policies]
    if missing:
        raise ValueError(
            f"rollout needs a policy for every agent of {raw.possible_agents}; missing {missing}"
        )
    # Agents given the same policy object share one batch.
    wrapped: dict[int, Policy] = {}
    policy_of = {
        agent: wrapped.setdefault(id(policies[agent]), as_policy(policies[agent]))
        for agent in raw.possible_agents
    }
    jobs = _plan_jobs(episodes, tasks, group_size, seed, raw.num_tasks)
    width = max(1, min(len(jobs), num_envs or len(jobs)))
    envs += [make(env_id, **env_kwargs) for _ in range(width - 1)]

    results: list[Episode | None] = [None] * len(jobs)
    queue = list(reversed(jobs))
    running: dict[int, tuple[_Job, float]] = {}  # env slot -> (job, start time)
    bar = tqdm(total=len(jobs), desc=f"rollout {env_id}", unit="ep", disable=not progress)

    def start(slot: int) -> None:
        while queue:
            job = queue.pop()
            options = {} if job.task_index is None else {"task_index": job.task_index}
            try:
                envs[slot].reset(seed=job.seed, options=options)
            except Exception as error:  # a task that cannot even start fails alone
                results[job.index] = _failed_episode(env_id, job, _error_text(error))
                bar.update(1)
                continue
            running[slot] = (job, time.monotonic())
            return

    def finish(slot: int, error: str | None = None) -> None:
        job, _ = running.pop(slot)
        episode = envs[slot].unwrapped.episode
        if error is not None:
            envs[slot].unwrapped.record_failure(error)
        episode.metadata.update(group=job.group, job=job.index)
        results[job.index] = episode
        bar.update(1)
        start(slot)

    for slot in range(width):
        start(slot)
    while running:
        pending: dict[int, list[tuple[int, Turn]]] = {}  # id(policy) -> [(slot, turn)]
        for slot in list(running):
            env = envs[slot]
            # Dead steps need no policy: run them until a live agent must act or all have left.
            try:
                while env.agents and (
                    env.terminations[env.agent_selection] or env.truncations[env.agent_selection]
                ):
                    env.step(None)
            except Exception as error:
                finish(slot, _error_text(error))
                continue
            if not env.agents:
                finish(slot)
                continue
            job, started = running[slot]
            if episode_timeout_s is not None and time.monotonic() - started > episode_timeout_s:
                finish(slot, f"TimeoutError: episode ran past {episode_timeout_s} s")
                continue
            agent = env.agent_selection
            turn = Turn(agent=agent, observation=env.observe(agent), env=env.unwrapped)
            pending.setdefault(id(policy_of[agent]), []).append((slot, turn))

        for batch in pending.values():
            policy = policy_of[batch[0][1].agent]
            started_ns = time.time_ns()
            try:
                actions: list[Any] = _act(policy, [turn for _, turn in batch])
            except Exception:
                # Retry one by one, so that one bad turn fails only its own episode.
                actions = []
                for _, turn in batch:
                    try:
                        actions.append(_act(policy, [turn])[0])
                    except Exception as error:
                        actions.append(_PolicyFailure(_error_text(error)))
            ended_ns = time.time_ns()
            for (slot, turn), action in zip(batch, actions, strict=True):
                _record_llm_call(turn, action, policy, len(batch), started_ns, ended_ns)
                if isinstance(action, _PolicyFailure):
                    finish(slot, action.error)
                    continue
                try:
                    envs[slot].step(action)
                except Exception as error:
                    finish(slot, _error_text(error))
    bar.close()
    for env in envs:
        env.close()
    return results  # type: ignore[return-value]


def _failed_episode(env_id: str, job: _Job, error: str) -> Episode:
    return Episode(
        episode_id=f"failed-{job.index}",
        env_id=env_id,
        task_id="",
        task_index=-1 if job.task_index is None else job.task_index,
        agents=[],
        failed=True,
        error=error,
        seed=job.seed,
        metadata={"group": job.group, "job": job.index},
    )
