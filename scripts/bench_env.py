"""Env steps per second with scripted policies: the env must never be the bottleneck beside an LLM.

    python scripts/bench_env.py [--episodes 2000] [--out benchmarks/results/bench_env.json]

Two loops per env and workflow: ``env.step()`` driven by hand (the env alone), and
``boltzoo.rollout`` (the env plus batching). The policy is the oracle, after a first action that
uses the tool without finishing (a calculator call; a wrong query the checker rejects), so
episodes take several turns. Steps include the tools: SQL execution, retrieval (dense retrieval
embeds each query with MiniLM on the CPU, which is the slowest part by far).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import boltzoo
from benchlib import write_record
from boltzoo.agents.base import Turn

# A first action that uses the env's tool without finishing, so an episode takes several turns.
DETOURS = {
    "boltzoo/math-v0": "First <calc>(12 + 30) * 3 - 7%</calc>.",
    "boltzoo/sql-v0": "```sql\nSELECT 1\n```",  # executed, rejected by the checker, rewritten
}


class DetourThenOracle:
    """A scripted team: the detour above as the episode's first action, then the oracle."""

    def act(self, turns: list[Turn]) -> list[str]:
        actions = []
        for turn in turns:
            env = turn.env
            detour = DETOURS.get(env.env_id)
            if detour and not env.episode.steps:
                actions.append(detour)
            else:
                actions.append(env.oracle_action(turn.agent))
        return actions


def bench_raw(env_id: str, episodes: int, **env_kwargs) -> dict:
    env = boltzoo.make(env_id, **env_kwargs)
    policy = DetourThenOracle()
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
    agents = boltzoo.make(env_id, **env_kwargs).unwrapped.possible_agents
    policy = DetourThenOracle()
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
    success = sum(bool(e.success) for e in done) / len(done)
    return {
        "steps": steps,
        "seconds": elapsed,
        "steps_per_second": steps / elapsed,
        "success_rate": success,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=None, help="also write the results as JSON")
    args = parser.parse_args()
    cases = [
        ("boltzoo/math-v0", {"agents": ("solver",)}),
        ("boltzoo/math-v0", {"agents": ("solver", "verifier")}),
        ("boltzoo/sql-v0", {"agents": ("writer",)}),
        ("boltzoo/sql-v0", {"agents": ("writer", "checker", "rewriter")}),
        ("boltzoo/rag-v0", {"agents": ("searcher", "answerer"), "retriever": "bm25"}),
        ("boltzoo/rag-v0", {"agents": ("searcher", "answerer"), "retriever": "dense"}),
    ]
    rows = []
    for env_id, kwargs in cases:
        for loop, bench in (("env.step", bench_raw), ("rollout", bench_rollout)):
            result = bench(env_id, args.episodes, **kwargs)
            row = {"env": env_id, **kwargs, "loop": loop, **result}
            rows.append(row)
            label = "+".join(kwargs["agents"]) + (
                f" ({kwargs['retriever']})" if "retriever" in kwargs else ""
            )
            print(
                f"{env_id:16} {label:26} {loop:9} {result['steps']:6d} steps "
                f"{result['steps_per_second']:9.0f} steps/s"
            )
    if args.out:
        write_record(args.out, rows)


if __name__ == "__main__":
    main()
