"""Rollouts on Ray workers: the same episodes as in process, a killed or hung worker loses only
its own episodes and is replaced, a training run learns with its rollouts on two workers.

One local Ray serves the whole module (started by the first pool, stopped at the end)."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time

import pytest

ray = pytest.importorskip("ray")

import boltzoo  # noqa: E402
from boltzoo.agents.models import tiny_model  # noqa: E402
from boltzoo.agents.scripted import OraclePolicy  # noqa: E402
from boltzoo.episode import Completion  # noqa: E402
from boltzoo.lightningrl.trainer import Trainer  # noqa: E402
from boltzoo.rollout import WorkerPool, connect_ray  # noqa: E402

LOOPBACK = ("0100007F:", "0000000000000000FFFF00000100007F:")  # 127.0.0.1 in IPv4, IPv6

pytestmark = [pytest.mark.ray, pytest.mark.slow]  # Ray workers start in seconds


def _listening_tcp() -> set[str]:
    """Local addresses (hex ip:port) of the machine's listening TCP sockets."""
    listening = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            rows = [line.split() for line in f.readlines()[1:]]
        listening |= {row[1] for row in rows if row[3] == "0A"}
    return listening


# The workers cannot import this test module: its policies travel by value.
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    if ray.is_initialized():
        ray.shutdown()
    before = _listening_tcp()
    connect_ray(None)
    yield
    after = _listening_tcp()
    ray.shutdown()
    # Every socket the local Ray opened listens on 127.0.0.1, none on another interface.
    opened = after - before
    assert opened, "Ray opened no listening socket?"
    assert all(address.startswith(LOOPBACK) for address in opened), sorted(opened)


def scripted_completion(observation):
    """A deterministic policy with token ids and logprobs, as a model backend returns them."""
    text = observation["messages"][-1]["content"]
    ids = [ord(c) % 97 for c in text[-12:]]
    return Completion(
        text=f"\\boxed{{{len(text) % 7}}}",
        prompt_token_ids=ids,
        response_token_ids=ids[:3],
        logprobs=[-0.5, -0.25, -0.125],
    )


def summary(episode):
    return (
        episode.task_index,
        episode.seed,
        episode.metadata["group"],
        [
            (s.agent, s.action.text, s.action.response_token_ids, s.action.logprobs, s.rewards)
            for s in episode.steps
        ],
        episode.score,
        episode.failed,
    )


@pytest.mark.parametrize("policy", [scripted_completion, OraclePolicy()], ids=["ids", "oracle"])
def test_two_workers_return_the_in_process_episodes(policy):
    kwargs = dict(tasks=[3, 1, 4, 1, 5], group_size=2, seed=7, progress=False, level="easy")
    here = boltzoo.rollout("math-v0", {"solver": policy}, **kwargs)
    there = boltzoo.rollout("math-v0", {"solver": policy}, workers=2, **kwargs)
    assert [summary(e) for e in there] == [summary(e) for e in here]
    assert not any(e.failed for e in there)
    # the scripted token ids and logprobs travel back unchanged
    if policy is scripted_completion:
        action = there[0].steps[0].action
        assert action.logprobs == [-0.5, -0.25, -0.125] and len(action.prompt_token_ids) == 12


class SlowPolicy:
    """Answers after ``delay_s``; in the process whose pid is ``hang_pid``, never answers."""

    def __init__(self, delay_s: float, hang_pid: int | None = None):
        self.delay_s, self.hang_pid = delay_s, hang_pid

    def act(self, turns):
        time.sleep(3600 if os.getpid() == self.hang_pid else self.delay_s)
        return ["\\boxed{1}" for _ in turns]


def test_a_killed_worker_loses_only_its_episodes_and_is_replaced():
    with WorkerPool(2) as pool:
        pids = pool.pids()
        pool.install({"slow": SlowPolicy(0.5)}, {"solver": "slow"})
        killer = threading.Timer(2.0, os.kill, args=(pids[0], signal.SIGKILL))
        killer.start()
        episodes = pool.rollout(
            "math-v0", tasks=list(range(8)), group_size=1, num_envs=1, progress=False
        )
        killer.join()
        assert len(episodes) == 8 and len({e.metadata["job"] for e in episodes}) == 8
        # groups 0, 2, 4, 6 ran on worker 0: failed, with the reason; the others finished
        lost = [e for e in episodes if e.failed]
        assert [e.metadata["group"] for e in lost] == [0, 2, 4, 6]
        assert all("WorkerError" in e.error for e in lost)
        assert all(not e.failed and len(e.steps) >= 1 for e in episodes if e not in lost)
        assert pool.restarts == 1
        # the next rollout runs on a fresh worker that has the installed policy
        new_pids = pool.pids()
        assert new_pids[0] not in pids and new_pids[1] == pids[1]
        again = pool.rollout("math-v0", tasks=[0, 1], group_size=1, progress=False)
        assert not any(e.failed for e in again)


def install_hanging_on(pool, pid):
    """Warm the workers up (they import the envs), then give them a policy that hangs in the
    worker of process ``pid``."""
    pool.install({"fast": SlowPolicy(0.0)}, {"solver": "fast"})
    pool.rollout("math-v0", tasks=[0, 1], progress=False)
    pool.install({"slow": SlowPolicy(0.0, hang_pid=pid)}, {"solver": "slow"})


def test_a_hung_worker_is_given_up_after_its_timeouts(monkeypatch):
    # (boltzoo.rollout is the function; its module is in sys.modules)
    monkeypatch.setattr(sys.modules["boltzoo.rollout"], "WORKER_GRACE_S", 2.0)
    with WorkerPool(2) as pool:
        pids = pool.pids()
        install_hanging_on(pool, pids[1])
        started = time.monotonic()
        episodes = pool.rollout(
            "math-v0", tasks=[0, 1, 2, 3], group_size=1, episode_timeout_s=1.0, progress=False
        )
        assert time.monotonic() - started < 30
        assert [e.failed for e in episodes] == [False, True, False, True]
        assert pool.restarts == 1 and pool.pids()[1] != pids[1]


def test_a_hung_worker_without_episode_timeouts_is_given_up_after_the_default_bound(monkeypatch):
    module = sys.modules["boltzoo.rollout"]
    monkeypatch.setattr(module, "WORKER_GRACE_S", 1.0)
    monkeypatch.setattr(module, "WORKER_EPISODE_BOUND_S", 2.0)
    with WorkerPool(2) as pool:
        pids = pool.pids()
        install_hanging_on(pool, pids[0])
        started = time.monotonic()
        episodes = pool.rollout("math-v0", tasks=[0, 1], group_size=1, progress=False)
        assert time.monotonic() - started < 30  # (without a bound: the hour the policy sleeps)
        assert [e.failed for e in episodes] == [True, False]
        assert "worker 0 hung" in episodes[0].error


def test_a_tiny_model_learns_with_rollouts_on_two_workers(
    tmp_path, smollm2_tokenizer, tokens_config, monkeypatch
):
    # as tests/lightningrl/test_trainer.py's in-process run: the reward (the share of target
    # tokens, ~6% by chance) rises well above chance; the workers sample with synced copies.
    from boltzoo.lightningrl import samplers

    built_here = []  # sampling copies built in this (the learner's) process
    real_copy_model = samplers._copy_model
    monkeypatch.setattr(
        samplers, "_copy_model", lambda *a: built_here.append(1) or real_copy_model(*a)
    )
    config = tokens_config(tmp_path, seed=1, steps=12, rollout_workers=2)
    model = tiny_model(len(smollm2_tokenizer))
    with Trainer(config, model=model, tokenizer=smollm2_tokenizer) as trainer:
        assert trainer.sampling.kind == "copy" and trainer.sampling.pool is not None
        history = trainer.train()
        # the workers built their copies; the learner holds what it ships, and never samples
        assert built_here == []
        with pytest.raises(RuntimeError, match="samples on the rollout workers only"):
            trainer.sampling.trained["policy"].act([])
    start, end = history[0]["reward"], sum(m["reward"] for m in history[-2:]) / 2
    assert start < 0.15
    assert end > 0.3 and end > 3 * start
    # every sample came from the weights of its own step
    assert all(m["stale_transitions"] == 0 and m["failed_episodes"] == 0 for m in history)


def calculator_model(turn):
    """A scripted model for an AutoGen solver: a calculator call on the problem's numbers,
    then an answer with the calculator's result."""
    messages = turn.observation["messages"]
    if messages[-1]["role"] == "tool":
        return f"So the answer is \\boxed{{{messages[-1]['content'].strip()}}}."
    numbers = [w for w in messages[-1]["content"].replace("?", " ").split() if w.isdigit()]
    expression = "+".join(numbers[:2]) or "1+1"
    call = json.dumps({"name": "calculator", "arguments": {"expression": expression}})
    return f"<tool_call>{call}</tool_call>"


def test_framework_agents_roll_out_on_workers_behind_their_own_gateways(smollm2_tokenizer):
    pytest.importorskip("autogen_agentchat")
    from boltzoo.agents.examples import autogen_assistant
    from boltzoo.agents.frameworks import AutoGenPolicy
    from boltzoo.agents.gateway import Gateway
    from boltzoo.agents.scripted import ScriptedPolicy

    kwargs = dict(tasks=[0, 5, 9], group_size=2, seed=3, progress=False, level="easy")
    model = ScriptedPolicy(calculator_model, smollm2_tokenizer, name="smol")
    with Gateway(model) as gateway:
        solver = AutoGenPolicy(autogen_assistant("math-v0", "solver"), gateway)
        here = boltzoo.rollout("math-v0", {"solver": solver}, **kwargs)
        served_here = len(gateway.batch_sizes)
        there = boltzoo.rollout("math-v0", {"solver": solver}, workers=2, **kwargs)
        # the workers' agents called the gateways on the workers, not this one
        assert len(gateway.batch_sizes) == served_here

    def calls(episode):
        return [
            (c.text, c.prompt_token_ids, c.response_token_ids)
            for s in episode.steps
            for c in s.action.inner_calls
        ]

    assert not any(e.failed for e in there)
    assert [summary(e) for e in there] == [summary(e) for e in here]
    assert [calls(e) for e in there] == [calls(e) for e in here]
    # each episode's agent made two LLM calls (tool call, answer) through a worker's gateway
    assert all(len(calls(e)) == 2 for e in there)
    assert [s.info.get("tool_calls") for e in there for s in e.steps] == [1] * 6


@pytest.mark.parametrize(
    "framework, needs, env, env_kwargs, train_agents",
    [
        ("autogen", "autogen_agentchat", "math-v0", {"max_turns": 1}, None),
        # one graph node by node: the writer node trains, the checker calls the frozen model
        (
            "langgraph-sql-graph",
            "langgraph",
            "sql-v0",
            {"agents": ["writer"], "schema_rows": 0},
            ["writer"],
        ),
    ],
)
def test_a_framework_agent_trains_with_its_rollouts_on_workers(
    tmp_path, smollm2_tokenizer, trainer_config, framework, needs, env, env_kwargs, train_agents
):
    pytest.importorskip(needs)
    config = trainer_config(
        tmp_path,
        env=env,
        env_kwargs=env_kwargs,
        framework=framework,
        train_agents=train_agents,
        steps=2,
        lora_r=4,
        rollout_workers=2,
    )
    with Trainer(
        config, model=tiny_model(len(smollm2_tokenizer)), tokenizer=smollm2_tokenizer
    ) as t:
        history = t.train()
        # the driver's gateways (the frozen model's too) served nothing: the workers' did
        assert t.gateways and not any(g.batch_sizes for g in t.gateways.values())
    for step, metrics in enumerate(history):
        assert metrics["episodes"] == 4 and metrics["failed_episodes"] == 0
        # every call the workers' agents made became a transition, sampled with the weights
        # of its own step: the workers' gateways serve the synced copies
        assert metrics["transitions"] >= 4 and metrics["stale_transitions"] == 0, step


def test_a_resumed_run_on_workers_samples_what_the_uninterrupted_one_did(
    tmp_path, smollm2_tokenizer, tokens_config
):
    # The workers' sampling generators are in the checkpoint: the resumed run draws the same
    # samples as the run that went straight through (worker 1 draws from its own stream, so
    # a checkpoint without it would give a different reward from step 3 on).
    def run(folder, steps, resume=False):
        config = tokens_config(folder, steps=steps, save_every=2, rollout_workers=2)
        with Trainer(
            config, model=tiny_model(len(smollm2_tokenizer)), tokenizer=smollm2_tokenizer
        ) as t:
            assert t.resume() == resume
            return t.train()

    straight = run(tmp_path / "a", 4)
    run(tmp_path / "b", 2)
    resumed = run(tmp_path / "b", 4, resume=True)
    assert len(resumed) == 2
    assert [m["reward"] for m in resumed] == [m["reward"] for m in straight[2:]]


def test_an_agent_command_plays_on_workers_with_their_own_gateways_and_hubs(smollm2_tokenizer):
    import sys
    from pathlib import Path

    from boltzoo.agents.scripted import ScriptedPolicy

    solver = Path(__file__).parents[1] / "examples" / "agent_programs" / "solver.py"
    model = ScriptedPolicy(lambda turn: "The answer is \\boxed{7}.", smollm2_tokenizer, name="smol")
    kwargs = dict(tasks=[0, 5, 9], group_size=2, seed=3, progress=False, level="easy")
    command = f"{sys.executable} {solver}"
    here = boltzoo.rollout("math-v0", {"solver": model}, agent_command=command, **kwargs)
    there = boltzoo.rollout(
        "math-v0", {"solver": model}, agent_command=command, workers=2, **kwargs
    )
    assert not any(e.failed for e in there), [e.error for e in there]
    assert [summary(e) for e in there] == [summary(e) for e in here]
    calls = [c.response_token_ids for e in there for s in e.steps for c in s.action.inner_calls]
    assert len(calls) == 6 and all(calls)  # one model call per turn, recorded on a worker


def _units_tasks_env(**kwargs):
    """An env only this process knows: a TaskEnv built by a function of this test module."""
    from boltzoo.envs import TaskEnv

    rows = [{"id": str(n), "question": f"Double {n}.", "answer": str(2 * n)} for n in range(6)]
    return TaskEnv(
        tasks=rows,
        reward=lambda parsed, answer: float(parsed == answer),
        oracle="answer",
        **kwargs,
    )


def test_an_env_registered_in_the_driver_plays_on_fresh_workers():
    # Registered here after the workers' processes may exist: they learn it with their jobs.
    boltzoo.register("tests/driver-only-v0", _units_tasks_env)
    here = boltzoo.rollout(
        "tests/driver-only-v0", {"agent": OraclePolicy()}, tasks=range(6), progress=False
    )
    there = boltzoo.rollout(
        "tests/driver-only-v0", {"agent": OraclePolicy()}, tasks=range(6), workers=2,
        progress=False,
    )  # fmt: skip
    assert [e.failed for e in there] == [False] * 6 and all(e.success for e in there)
    assert [e.env_id for e in there] == ["tests/driver-only-v0"] * 6
    assert [summary(e) for e in there] == [summary(e) for e in here]
