"""Env steps per second with scripted policies: the env must never be the bottleneck beside an LLM.

    python scripts/bench_env.py [--episodes 2000] [--out benchmarks/results/bench_env.json]

Two loops per env and workflow: ``env.step()`` driven by hand (the env alone), and
``boltzoo.rollout`` (the env plus batching). The policy calls the calculator once, then answers
(the oracle's answer): two solver turns an episode, plus the verifier's turn where there is one.
Runs on one core (torch is not involved).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import boltzoo
from benchlib import write_record
from boltzoo.agents.base import Turn


class CalcThenAnswer:
    """A scripted solver: a calculator call first, the oracle's answer on its next turn."""

    def act(self, turns: list[Turn]) -> list[str]:
        actions = []
        for turn in turns:
            env = turn.env
            if turn.agent == "solver" and len(turn.observation["messages"]) == 2:
                actions.append("First <calc>(12 + 30) * 3 - 7%</calc>.")
            else:
                actions.append(env.oracle_action(turn.agent))
        return actions


def bench_raw(env_id: str, episodes: int, **env_kwargs) -> dict:
    env = boltzoo.make(env_id, **env_kwargs)
    policy = CalcThenAnswer()
    steps = 0
    started = time.perf_counter()
    for i in range(episodes):
        env.reset(seed=i)
        for agent in env.agent_iter():
            obs, _, term, trunc, _ = env.last()
            if term or trunc:
                env.step(None)
                continue
            env.step(policy.act([Turn(agent, obs, env.unwrapped)])[0])
            steps += 1
    elapsed = time.perf_counter() - started
    return {"steps": steps, "seconds": elapsed, "steps_per_second": steps / elapsed}


def bench_rollout(env_id: str, episodes: int, **env_kwargs) -> dict:
    agents = env_kwargs.get("agents", ("solver",))
    policy = CalcThenAnswer()
    started = time.perf_counter()
    done = boltzoo.rollout(
        env_id,
        {a: policy for a in agents},
        episodes=episodes,
        num_envs=64,
        progress=False,
        **env_kwargs,
    )
    elapsed = time.perf_counter() - started
    steps = sum(len(e.steps) for e in done)
    assert all(e.success for e in done), "the scripted policy must solve every task"
    return {"steps": steps, "seconds": elapsed, "steps_per_second": steps / elapsed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=None, help="also write the results as JSON")
    args = parser.parse_args()
    cases = [
        ("boltzoo/math-v0", {"agents": ("solver",)}),
        ("boltzoo/math-v0", {"agents": ("solver", "verifier")}),
    ]
    rows = []
    for env_id, kwargs in cases:
        for loop, bench in (("env.step", bench_raw), ("rollout", bench_rollout)):
            result = bench(env_id, args.episodes, **kwargs)
            row = {"env": env_id, "agents": list(kwargs["agents"]), "loop": loop, **result}
            rows.append(row)
            print(
                f"{env_id:18} {'+'.join(kwargs['agents']):16} {loop:9} "
                f"{result['steps']:6d} steps  {result['steps_per_second']:9.0f} steps/s"
            )
    if args.out:
        write_record(args.out, rows)


if __name__ == "__main__":
    main()
