"""Running envs with policies: batched in one process, or spread over Ray workers.

In one process (the default), at each tick every running env whose current agent is alive
contributes one pending turn; the turns are grouped by the policy that acts for their agent, and
each policy is called once with its whole batch (a model backend samples them together).
Episodes end independently; a finished env starts the next job at once, so the batch stays full.

An episode whose policy or env raised, or that ran past ``episode_timeout_s``, comes back with
``failed=True`` and the error; the others go on.

With ``workers=N`` the same loop runs on N Ray actors (:class:`WorkerPool`), each with its own
envs and its own copy of the policies; whole groups of episodes go to one worker, and the
episodes come back exactly as in-process ones. A worker that dies or hangs loses only its own
episodes (marked failed) and is replaced by a fresh one.
"""

from __future__ import annotations

import contextlib
import os
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from opentelemetry.trace import Status, StatusCode
from tqdm.auto import tqdm

from boltzoo.agents.base import Policy, Turn, as_policy
from boltzoo.episode import Completion, Episode
from boltzoo.errors import MissingDependencyError
from boltzoo.registration import EnvSpec, ensure_registered, env_spec, inspected, make
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
    """Return ``policy``'s actions for ``turns``; an exception a policy returns in place of an
    action (an agent program that failed) becomes that turn's failure."""
    actions = policy.act(turns)
    if len(actions) != len(turns):
        raise RuntimeError(f"{policy!r} returned {len(actions)} actions for {len(turns)} turns")
    return [_PolicyFailure(_error_text(a)) if isinstance(a, BaseException) else a for a in actions]


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
    workers: int = 0,
    ray_address: str | None = None,
    agent_command: str | None = None,
    agent_timeout_s: float = 120.0,
    agent_concurrency: int = 16,
    env_kwargs: Mapping[str, Any] | None = None,
    **more_env_kwargs: Any,
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
        num_envs: env instances run at once, per worker (default: all episodes at once).
        episode_timeout_s: an episode running longer is marked failed.
        progress: show a progress bar of episodes done.
        workers: run on this many Ray actors (0: in this process). Every worker gets a pickled
            copy of the policies (a model policy with its weights) and whole groups of episodes.
        ray_address: the Ray cluster to join (``"auto"`` or ``"host:port"``); None starts a
            local Ray bound to 127.0.0.1, or uses the one this process already runs.
        agent_command: play every agent with this command line, run once per turn (an agent
            program: ``boltzoo.agents.programs``); ``policies`` are then the models each agent's
            calls go to, through a gateway. ``agent_timeout_s``: a turn running longer is killed
            and fails; ``agent_concurrency``: programs running at once.
        env_kwargs: passed to ``boltzoo.make``, as a dict (an env's own ``tasks=`` rows go
            here: ``tasks`` above are indices) or as further keyword arguments.
    """
    env_kwargs = merged_env_kwargs(env_kwargs, more_env_kwargs)
    with inspected(env_id, **env_kwargs) as raw:
        agents, num_tasks = raw.possible_agents, raw.num_tasks
    policy_of = _policies_by_agent(agents, policies)
    with contextlib.ExitStack() as stack:
        if agent_command is not None:
            from boltzoo.agents.programs import AgentCommand, program_gateway

            models = {id(p): p for p in policy_of.values()}
            # one model for all: it serves the program's other roles too
            default = next(iter(models.values())) if len(models) == 1 else None
            gateway = program_gateway(default, routes=policy_of)
            stack.callback(gateway.close)
            program = AgentCommand(
                agent_command, gateway, timeout_s=agent_timeout_s, concurrency=agent_concurrency
            )
            stack.callback(program.close)
            policy_of = {agent: program for agent in policy_of}
        if workers:
            names: dict[int, str] = {}  # one name per distinct policy object
            for policy in policy_of.values():
                names.setdefault(id(policy), f"policy{len(names)}")
            samplers = {names[id(p)]: p for p in policy_of.values()}
            with WorkerPool(workers, ray_address) as pool:
                pool.install(samplers, {agent: names[id(p)] for agent, p in policy_of.items()})
                return pool.rollout(
                    env_id,
                    episodes,
                    tasks,
                    group_size,
                    seed,
                    num_envs=num_envs,
                    episode_timeout_s=episode_timeout_s,
                    progress=progress,
                    env_kwargs=env_kwargs,
                )
        return run_jobs(
            env_id,
            policy_of,
            _plan_jobs(episodes, tasks, group_size, seed, num_tasks),
            num_envs=num_envs,
            episode_timeout_s=episode_timeout_s,
            progress=progress,
            env_kwargs=env_kwargs,
        )


def merged_env_kwargs(
    env_kwargs: Mapping[str, Any] | None, more: Mapping[str, Any]
) -> dict[str, Any]:
    """Return ``env_kwargs`` and ``more`` as one dict; a name in both is a TypeError."""
    both = sorted(set(env_kwargs or {}) & set(more))
    if both:
        raise TypeError(f"env keyword arguments given twice: {both}")
    return {**(env_kwargs or {}), **more}


def _policies_by_agent(
    agents: Sequence[str],
    policies: Mapping[str, Policy | Callable[[dict[str, Any]], str | Completion]],
) -> dict[str, Policy]:
    missing = [a for a in agents if a not in policies]
    if missing:
        raise ValueError(f"rollout needs a policy for every agent of {agents}; missing {missing}")
    # Agents given the same policy object share one batch.
    wrapped: dict[int, Policy] = {}
    return {
        agent: wrapped.setdefault(id(policies[agent]), as_policy(policies[agent]))
        for agent in agents
    }


def run_jobs(
    env_id: str,
    policy_of: Mapping[str, Policy],
    jobs: Sequence[_Job],
    *,
    num_envs: int | None = None,
    episode_timeout_s: float | None = None,
    progress: bool = True,
    env_kwargs: Mapping[str, Any] | None = None,
) -> list[Episode]:
    """Play ``jobs`` in this process with ``policy_of`` (agent -> Policy); return their
    Episodes in the jobs' order (the loop of the module docstring)."""
    if not jobs:
        return []
    width = max(1, min(len(jobs), num_envs or len(jobs)))
    envs = [make(env_id, **(env_kwargs or {})) for _ in range(width)]

    results: list[Episode | None] = [None] * len(jobs)
    position = {job.index: i for i, job in enumerate(jobs)}  # jobs may be a worker's share
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
                results[position[job.index]] = _failed_episode(env_id, job, _error_text(error))
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
        results[position[job.index]] = episode
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


@contextlib.contextmanager
def greedy_sampling(policies: Iterable[Any]) -> Iterator[None]:
    """Within the block, model policies decode greedily (temperature 0); afterwards their
    sampling parameters and random generators are as they were, so that an evaluation between
    training steps leaves the training samples unchanged."""
    policies = [p for p in policies if hasattr(p, "sampling")]
    saved = [(p.sampling, generator_state(p)) for p in policies]
    for p in policies:
        p.sampling = replace(p.sampling, temperature=0.0)
    try:
        yield
    finally:
        for p, (sampling, state) in zip(policies, saved, strict=True):
            p.sampling = sampling
            if state is not None:
                p.generator.set_state(state)


def generator_state(policy: Any) -> Any:
    """Return the state of ``policy``'s random generator (None if it has none)."""
    generator = getattr(policy, "generator", None)  # vLLM seeds per request instead
    return generator.get_state() if generator is not None else None


# --- Ray workers ---------------------------------------------------------------------------

WORKER_GRACE_S = 60.0  # beyond its episodes' timeouts, how long a worker may take to answer
# A worker's episodes without a timeout of their own are still bounded, so that a hung worker
# never stalls a run: this many seconds for each wave of episodes it plays at once.
WORKER_EPISODE_BOUND_S = 900.0


def connect_ray(address: str | None = None) -> None:
    """Start or join Ray once per process: ``address`` None starts a local Ray whose sockets
    bind to 127.0.0.1 only; ``"auto"`` or ``"host:port"`` joins a running cluster."""
    try:
        import ray
    except ImportError:
        raise MissingDependencyError(
            "rollout workers need Ray: pip install 'boltzoo[ray]'"
        ) from None
    if ray.is_initialized():
        return
    if address is None:
        # Without this a local Ray listens on every interface of the machine. Ray's processes
        # read it when they start; this process read it when it imported ray (maybe before us),
        # hence the constant too.
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        # Ray runs workers at niceness 15, for background work; ours is the main work (at 15,
        # a busy machine ran a worker's imports 10x slower).
        os.environ.setdefault("RAY_worker_niceness", "0")
        if os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] == "0":
            from ray._private import ray_constants

            ray_constants.ENABLE_RAY_CLUSTER = False
        ray.init(address="local", include_dashboard=False, log_to_driver=False)
    else:
        ray.init(address=address, log_to_driver=False)


class RolloutWorker:
    """What one Ray actor holds: named policies (samplers), which agent uses which, and the
    envs it builds to play its share of a rollout (:func:`run_jobs`)."""

    def __init__(self, index: int = 0, threads: int | None = None) -> None:
        self.index = index
        if threads:  # Ray gives a worker one thread per CPU it reserves, one if it reserves none
            import torch

            torch.set_num_threads(threads)
        self.samplers: dict[str, Policy] = {}
        self.agents: dict[str, str] = {}

    def pid(self) -> int:
        """Return the worker's process id."""
        return os.getpid()

    def install(self, samplers: dict[str, Policy], agents: dict[str, str]) -> None:
        """Hold ``samplers`` (name -> policy) and ``agents`` (agent -> sampler name). Worker
        ``i > 0`` reseeds the samplers' generators (each worker draws its own samples; worker 0
        draws what the policies would draw in the calling process)."""
        self.samplers = {name: as_policy(p) for name, p in samplers.items()}
        self.agents = dict(agents)
        for policy in self.samplers.values():
            generator = getattr(policy, "generator", None)
            if self.index and generator is not None:
                generator.manual_seed(generator.initial_seed() + 1_000_003 * self.index)

    def load_weights(self, weights: dict[str, dict[str, Any]], version: int) -> None:
        """Load new weights into the named samplers; their Completions carry ``version``."""
        for name, state_dict in weights.items():
            self.samplers[name].load_weights(state_dict, version=version)

    def set_version(self, names: list[str], version: int) -> None:
        """Mark the named samplers' Completions with ``version`` (weights unchanged)."""
        for name in names:
            self.samplers[name].version = version

    def generator_states(self) -> dict[str, Any]:
        """Return the state of every sampler's random generator (name -> state or None)."""
        return {name: generator_state(p) for name, p in self.samplers.items()}

    def set_generator_states(self, states: dict[str, Any]) -> None:
        """Restore the random generators of :meth:`generator_states`."""
        for name, state in states.items():
            if state is not None and name in self.samplers:
                self.samplers[name].generator.set_state(state)

    def run(
        self,
        spec: EnvSpec,
        jobs: list[_Job],
        env_kwargs: dict[str, Any],
        num_envs: int | None,
        episode_timeout_s: float | None,
        greedy: bool,
    ) -> list[Episode]:
        """Play ``jobs`` of the env ``spec`` (registered here first: an env the driver
        registered is unknown to a fresh worker); return their Episodes in order."""
        ensure_registered(spec)
        policy_of = {agent: self.samplers[name] for agent, name in self.agents.items()}
        with greedy_sampling(self.samplers.values()) if greedy else contextlib.nullcontext():
            return run_jobs(
                spec.id,
                policy_of,
                jobs,
                num_envs=num_envs,
                episode_timeout_s=episode_timeout_s,
                progress=False,
                env_kwargs=env_kwargs,
            )


class WorkerPool:
    """``size`` rollout workers on Ray, each a :class:`RolloutWorker` actor.

    ``install`` ships the policies once (pickled through Ray's object store); ``load_weights``
    ships new weights once per update (one ``ray.put``, read by every worker); ``rollout`` plays a
    rollout's jobs spread over the workers, whole groups to one worker. A worker that dies, or
    does not answer within its episodes' timeouts (``WORKER_EPISODE_BOUND_S`` each, without one)
    plus ``WORKER_GRACE_S``, loses only its own
    episodes (returned failed, never played twice); it is replaced at once by a fresh worker
    given the installed policies and the latest weights. Use it as a context manager, or
    ``close()`` it.

    Args:
        size: how many workers.
        ray_address: see :func:`connect_ray`.
        actor_options: Ray's actor options for each worker (e.g. ``{"num_gpus": 1}``); by default
            a worker reserves no CPU (so that more workers than cores can run, as in tests) and
            workers spread over the cluster's nodes.
    """

    def __init__(
        self, size: int, ray_address: str | None = None, actor_options: dict | None = None
    ):
        if size < 1:
            raise ValueError(f"a worker pool needs at least one worker, got {size}")
        connect_ray(ray_address)
        import ray

        self._ray = ray
        options = {"num_cpus": 0, "scheduling_strategy": "SPREAD"} | (actor_options or {})
        self._actor = ray.remote(RolloutWorker).options(**options)
        self._installed: Any = None  # (object ref of the samplers, agent -> sampler name)
        self._weights: dict[str, tuple[Any, int]] = {}  # sampler name -> (weights ref, version)
        self._versions: dict[str, int] = {}
        self.restarts = 0
        # Without reserved CPUs, each worker's torch threads are its share of this machine's
        # cores (a local pool); on a cluster, reserve CPUs with actor_options' num_cpus.
        self._threads = None
        if not options["num_cpus"]:
            self._threads = max(1, (os.cpu_count() or 1) // size)
        self.workers = [self._actor.remote(i, self._threads) for i in range(size)]
        self.bytes_per_sync = 0

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the workers (Ray itself keeps running for the next pool)."""
        for worker in self.workers:
            self._ray.kill(worker)
        self.workers = []

    def pids(self) -> list[int]:
        """Return the workers' process ids."""
        return self._ray.get([w.pid.remote() for w in self.workers])

    def install(self, samplers: Mapping[str, Policy], agents: Mapping[str, str]) -> None:
        """Give every worker ``samplers`` (name -> policy, pickled) and ``agents`` (agent ->
        sampler name)."""
        self._installed = (self._ray.put(dict(samplers)), dict(agents))
        self._weights.clear()
        self._versions.clear()
        self._ray.get([w.install.remote(*self._installed) for w in self.workers])

    def load_weights(self, weights: Mapping[str, Mapping[str, Any]], version: int) -> None:
        """Load ``weights`` (sampler name -> state dict) into every worker's samplers, through
        one object in Ray's object store; their Completions carry ``version`` from now on."""
        weights = {name: dict(state) for name, state in weights.items()}
        ref = self._ray.put(weights)
        for name in weights:
            self._weights[name] = (ref, version)
        self.bytes_per_sync = sum(
            t.numel() * t.element_size() for state in weights.values() for t in state.values()
        )
        self._ray.get([w.load_weights.remote(ref, version) for w in self.workers])

    def set_version(self, names: Sequence[str], version: int) -> None:
        """Mark the named samplers' Completions with ``version`` on every worker."""
        for name in names:
            self._versions[name] = version
        self._ray.get([w.set_version.remote(list(names), version) for w in self.workers])

    def generator_states(self) -> list[dict[str, Any]]:
        """Return each worker's sampler generator states (what a checkpoint keeps, so that a
        resumed run draws the samples the uninterrupted one would)."""
        return self._ray.get([w.generator_states.remote() for w in self.workers])

    def set_generator_states(self, states: Sequence[dict[str, Any]]) -> None:
        """Restore :meth:`generator_states`, worker by worker (the same number of workers)."""
        if len(states) != len(self.workers):
            raise ValueError(f"{len(states)} workers' states for {len(self.workers)} workers")
        self._ray.get(
            [w.set_generator_states.remote(s) for w, s in zip(self.workers, states, strict=True)]
        )

    def _replace(self, index: int) -> None:
        """Kill worker ``index`` (if it still runs) and start a fresh one in its place, with the
        installed policies and the latest weights and versions."""
        self._ray.kill(self.workers[index], no_restart=True)
        worker = self._actor.remote(index, self._threads)
        calls = []
        if self._installed is not None:
            calls.append(worker.install.remote(*self._installed))
        for ref, version in {id(r): (r, v) for r, v in self._weights.values()}.values():
            calls.append(worker.load_weights.remote(ref, version))
        for name, version in self._versions.items():
            calls.append(worker.set_version.remote([name], version))
        self._ray.get(calls)  # an actor runs its calls in order
        self.workers[index] = worker
        self.restarts += 1

    def rollout(
        self,
        env_id: str,
        episodes: int | None = None,
        tasks: Sequence[int] | None = None,
        group_size: int = 1,
        seed: int = 0,
        *,
        num_envs: int | None = None,
        episode_timeout_s: float | None = None,
        progress: bool = True,
        greedy: bool = False,
        env_kwargs: Mapping[str, Any] | None = None,
    ) -> list[Episode]:
        """:func:`rollout` with the installed policies, on the workers (group ``g`` on worker
        ``g % size``); the lost workers' episodes come back failed. ``greedy`` decodes at
        temperature 0 for this rollout only."""
        spec = env_spec(env_id)
        env_kwargs = dict(env_kwargs or {})
        with inspected(env_id, **env_kwargs) as env:
            num_tasks = env.num_tasks
        jobs = _plan_jobs(episodes, tasks, group_size, seed, num_tasks)
        from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

        shares = [
            [j for j in jobs if j.group % len(self.workers) == w] for w in range(len(self.workers))
        ]
        pending = {
            self.workers[w].run.remote(
                spec, share, env_kwargs, num_envs, episode_timeout_s, greedy
            ): w
            for w, share in enumerate(shares)
            if share
        }
        waves = max((-(-len(s) // (num_envs or len(s) or 1)) for s in shares if s), default=0)
        bound = episode_timeout_s if episode_timeout_s is not None else WORKER_EPISODE_BOUND_S
        deadline = time.monotonic() + waves * bound + WORKER_GRACE_S
        results: dict[int, Episode] = {}
        bar = tqdm(total=len(jobs), desc=f"rollout {env_id}", unit="ep", disable=not progress)
        while pending:
            timeout = max(0.0, deadline - time.monotonic())
            done, _ = self._ray.wait(list(pending), num_returns=1, timeout=timeout)
            if not done:  # past the deadline: every worker still busy has hung
                for w in pending.values():
                    self._fail_share(env_id, shares[w], results, f"worker {w} hung")
                    self._replace(w)
                bar.update(sum(len(shares[w]) for w in pending.values()))
                break
            ref = done[0]
            w = pending.pop(ref)
            try:
                for job, episode in zip(shares[w], self._ray.get(ref), strict=True):
                    results[job.index] = episode
            except (RayActorError, RayTaskError, GetTimeoutError) as error:
                # a task error's last line is its exception; an actor error's first, its cause
                lines = [line for line in str(error).splitlines() if line.strip()] or [""]
                why = lines[-1] if isinstance(error, RayTaskError) else lines[0]
                self._fail_share(env_id, shares[w], results, f"worker {w} failed: {why}")
                self._replace(w)
            bar.update(len(shares[w]))
        bar.close()
        return [results[job.index] for job in jobs]

    @staticmethod
    def _fail_share(env_id: str, share: list[_Job], results: dict[int, Episode], why: str) -> None:
        first_line = why.strip().splitlines()[0][:500]
        for job in share:
            results[job.index] = _failed_episode(env_id, job, f"WorkerError: {first_line}")
