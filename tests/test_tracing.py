"""OpenTelemetry spans: episodes, env steps, tool calls, LLM calls and rewards."""

from __future__ import annotations

import pytest

import boltzoo
from boltzoo.agents import OraclePolicy, ScriptedPolicy


def spans_by_name(exporter):
    spans = {}
    for span in exporter.get_finished_spans():
        spans.setdefault(span.name, []).append(span)
    return spans


def test_rollout_records_the_span_tree_of_each_episode(span_exporter, tiny_policy):
    span_exporter.clear()

    def solver(turn):
        if len(turn.observation["messages"]) == 2:
            return "<calc>6*7</calc> and <calc>1/0</calc>"
        return f"\\boxed{{{turn.env.current_task.answer}}}"

    episodes = boltzoo.rollout(
        "math-v0",
        {"solver": ScriptedPolicy(solver), "verifier": tiny_policy(max_new_tokens=4)},
        episodes=3,
        agents=("solver", "verifier"),
        progress=False,
    )
    spans = spans_by_name(span_exporter)
    roots = spans["boltzoo.episode"]
    assert len(roots) == 3
    by_id = {span.context.span_id: span for spans_ in spans.values() for span in spans_}
    for root, episode in zip(
        sorted(roots, key=lambda s: s.attributes["boltzoo.episode_id"]),
        sorted(episodes, key=lambda e: e.episode_id),
        strict=True,
    ):
        assert root.attributes["boltzoo.task_id"] == episode.task_id
        assert root.attributes["boltzoo.score"] == episode.score
        assert root.attributes["boltzoo.turns"] == len(episode.steps)
        rewards = [e for e in root.events if e.name == "boltzoo.reward"]
        assert {e.attributes["boltzoo.agent"] for e in rewards} <= {"solver", "verifier"}
        assert sum(e.attributes["boltzoo.reward"] for e in rewards) == sum(
            episode.returns().values()
        )

    steps = spans["boltzoo.env.step"]
    assert len(steps) == sum(len(e.steps) for e in episodes)
    assert all(by_id[s.parent.span_id].name == "boltzoo.episode" for s in steps)
    calculator = spans["boltzoo.tool.calculator"]
    assert len(calculator) == 6
    assert all(by_id[s.parent.span_id].name == "boltzoo.env.step" for s in calculator)
    assert sorted(s.attributes["boltzoo.ok"] for s in calculator) == [False] * 3 + [True] * 3

    calls = spans["boltzoo.llm.call"]
    assert len(calls) == len(steps)
    verifier_calls = [c for c in calls if c.attributes["boltzoo.agent"] == "verifier"]
    assert verifier_calls and all(c.attributes["boltzoo.model"] == "tiny" for c in verifier_calls)
    assert all(c.attributes["boltzoo.response_tokens"] >= 1 for c in verifier_calls)
    assert all(c.attributes["boltzoo.batch"] == 3 for c in verifier_calls)
    assert all(by_id[c.parent.span_id].name == "boltzoo.episode" for c in calls)


def test_failed_episode_span_carries_the_error(span_exporter):
    span_exporter.clear()

    def broken(obs):
        raise RuntimeError("model server gone")

    [episode] = boltzoo.rollout("math-v0", {"solver": broken}, episodes=1, progress=False)
    assert episode.failed
    [root] = spans_by_name(span_exporter)["boltzoo.episode"]
    assert (
        root.status.status_code.name == "ERROR" and "model server gone" in root.status.description
    )


def test_sql_and_search_tools_have_spans(span_exporter):
    span_exporter.clear()
    boltzoo.rollout(
        "sql-v0", {"writer": OraclePolicy()}, episodes=2, agents=("writer",), progress=False
    )
    boltzoo.rollout(
        "rag-v0",
        {"answerer": OraclePolicy()},
        episodes=2,
        agents=("answerer",),
        retriever="bm25",
        progress=False,
    )
    spans = spans_by_name(span_exporter)
    assert len(spans["boltzoo.tool.sql"]) == 2
    assert all(s.attributes["boltzoo.ok"] for s in spans["boltzoo.tool.sql"])
    assert len(spans["boltzoo.tool.search"]) == 2


@pytest.mark.slow
def test_otel_environment_variables_send_spans_from_the_command_line():
    import os
    import subprocess
    import sys

    env = dict(os.environ, OTEL_TRACES_EXPORTER="console", OTEL_SERVICE_NAME="boltzoo-test")
    result = subprocess.run(
        [sys.executable, "-m", "boltzoo.cli", "eval", "math-v0", "--episodes", "2", "--quiet"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert '"name": "boltzoo.episode"' in result.stdout
    assert '"name": "boltzoo.tool.calculator"' in result.stdout
    assert "boltzoo-test" in result.stdout
