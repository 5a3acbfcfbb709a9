"""Agent programs' cost per call: the same turns played in process, by a command run once per
turn, and by a long-running service that claims them.

    python scripts/bench_remote_agent.py [--model scripted|smollm2-135m] [--turns 64]
        [--concurrency 16] [--rounds 3] [--out FILE]

The turns: math-v0's first solver turns (easy, one turn each), one LLM call per turn. Three
paths play them with the same model policy:

* in process: ``policy.act(turns)`` in batches of ``--concurrency`` (what ``boltzoo.rollout``
  does); a turn's latency is its batch's time;
* command: ``AgentCommand("python examples/agent_programs/solver.py")``, a Python process per
  turn (``--concurrency`` at once) that asks the model through the gateway with the OpenAI SDK
  and prints the answer; a turn's latency runs from its rollout's opening to its program's end;
* service: ``AgentService`` with ``examples/agent_programs/service.py --workers
  --concurrency`` (one process, started once) claiming the turns over HTTP; a turn's latency
  runs from its rollout's opening to its answer.

Reported per path: turns per second, p50 and p99 latency, and the ratio of its throughput to
in process; the command and service paths also check that every turn's answer is the model's
text (nothing lost or changed). With ``--model scripted`` (a fixed 16-token answer with real
token ids and no sampling) the figures are each path's own cost; with ``smollm2-135m`` they
include sampling (greedy, 16 new tokens). Rounds alternate the order of the paths.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import boltzoo
from benchlib import write_record
from boltzoo.agents import ScriptedPolicy, Turn
from boltzoo.agents.programs import AgentCommand, AgentService

ROOT = Path(__file__).resolve().parents[1]
SOLVER = ROOT / "examples" / "agent_programs" / "solver.py"
SERVICE = ROOT / "examples" / "agent_programs" / "service.py"


class Timed:
    """Mixin: the seconds each turn took, from its rollout's opening to its end."""

    def reset_times(self) -> None:
        self.seconds: list[float] = []

    async def _play(self, rollout):  # (the policies' own hook, timed)
        started = time.perf_counter()
        problem = await super()._play(rollout)
        self.seconds.append(time.perf_counter() - started)
        return problem


class TimedCommand(Timed, AgentCommand):
    pass


class TimedService(Timed, AgentService):
    pass


def model_policy(name: str) -> object:
    """Return the model every path calls: a scripted one, or a real one (greedy)."""
    if name == "scripted":
        from transformers import AutoTokenizer

        from boltzoo.agents.models import smollm2_tokenizer_dir

        tokenizer = AutoTokenizer.from_pretrained(smollm2_tokenizer_dir())
        answer = tokenizer.decode(list(range(1000, 1016)))
        return ScriptedPolicy(lambda turn: answer, tokenizer, name="scripted")
    from boltzoo.agents.models import load_policy

    return load_policy(name, max_new_tokens=16, temperature=0.0)


def turns_of(count: int) -> list[Turn]:
    turns = []
    for index in range(count):
        env = boltzoo.make("math-v0", level="easy", max_turns=1, few_shot=False)
        env.reset(options={"task_index": index})
        turns.append(Turn("solver", env.observe("solver"), env.unwrapped))
    return turns


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="scripted", help="scripted, or smollm2-135m")
    parser.add_argument("--turns", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None, help="also write the results as JSON")
    args = parser.parse_args()

    policy = model_policy(args.model)
    turns = turns_of(args.turns)
    expected = [c.text for c in policy.act(turns[:1])]  # (warm-up; greedy: the same every time)
    command = TimedCommand(
        f"{sys.executable} {SOLVER}", policy, concurrency=args.concurrency, timeout_s=300
    )
    service = TimedService(policy, concurrency=args.turns, timeout_s=300)
    worker = subprocess.Popen(
        [sys.executable, str(SERVICE), service.hub.url]
        + ["--workers", str(args.concurrency), "--idle-s", "3600"]
    )

    def in_process() -> tuple[float, list[float]]:
        latencies = []
        started = time.perf_counter()
        for start in range(0, len(turns), args.concurrency):
            batch_started = time.perf_counter()
            policy.act(turns[start : start + args.concurrency])
            took = time.perf_counter() - batch_started
            latencies += [took] * len(turns[start : start + args.concurrency])
        return time.perf_counter() - started, latencies

    def through(program: Timed) -> tuple[float, list[float]]:
        program.reset_times()
        started = time.perf_counter()
        results = program.act(turns)
        wall = time.perf_counter() - started
        texts = [getattr(r, "text", repr(r)) for r in results]
        if args.model == "scripted" and texts != expected * len(turns):
            raise SystemExit(f"{type(program).__name__}: answers differ from the model's: {texts}")
        return wall, program.seconds

    paths = {
        "in process": in_process,
        "command": lambda: through(command),
        "service": lambda: through(service),
    }
    walls: dict[str, list[float]] = {name: [] for name in paths}
    latencies: dict[str, list[float]] = {name: [] for name in paths}
    try:
        for round_ in range(-1, args.rounds):  # round -1: warm-up, not counted
            order = list(paths) if round_ % 2 == 0 else list(paths)[::-1]
            for name in order:
                wall, seconds = paths[name]()
                if round_ >= 0:
                    walls[name].append(wall)
                    latencies[name] += seconds
    finally:
        command.close()
        service.close()
        worker.terminate()
        worker.wait(timeout=30)

    base = args.turns / statistics.median(walls["in process"])
    rows = []
    for name in paths:
        rate = args.turns / statistics.median(walls[name])
        row = {
            "path": name,
            "turns_per_second": rate,
            "p50_ms": 1000 * statistics.median(latencies[name]),
            "p99_ms": 1000 * percentile(latencies[name], 0.99),
            "throughput_ratio_to_in_process": rate / base,
        }
        rows.append(row)
        print(
            f"{name:>10}: {rate:7.1f} turns/s, p50 {row['p50_ms']:8.1f} ms, p99 "
            f"{row['p99_ms']:8.1f} ms, throughput {row['throughput_ratio_to_in_process']:.3f}x "
            "in process"
        )
    if args.out:
        write_record(
            args.out,
            rows,
            model=args.model,
            turns=args.turns,
            concurrency=args.concurrency,
            rounds=args.rounds,
        )


if __name__ == "__main__":
    main()
