"""scripts/probe_checker.py: the SQL graph's checker verdicts counted against the truth."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import boltzoo
from boltzoo.agents import ScriptedPolicy
from boltzoo.agents.gateway import Gateway
from boltzoo.envs.sql_v0 import CHECKER_SYSTEM_PROMPT, REWRITER_SYSTEM_PROMPT
from boltzoo.episode import save_episodes

SCRIPT = Path(__file__).parents[1] / "scripts" / "probe_checker.py"
WRONG = "SELECT 1 WHERE 0"
ENV_KWARGS = {"split": "test", "agents": ["writer"], "schema_rows": 0}


def load_probe():
    spec = importlib.util.spec_from_file_location("probe_checker", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_verdict_is_counted_by_round_against_what_the_query_returns(
    tmp_path, smollm2_tokenizer
):
    # Four tasks, two graph rounds: the writer is right on tasks 0 and 2; the checker accepts
    # on tasks 0 and 1 (a miss on 1), rejects on 2 (a right query) and 3; the rewriter breaks
    # task 2's query and fixes task 3's. The probe must see each case where it happened.
    pytest.importorskip("langgraph")
    from boltzoo.agents.examples import langgraph_sql_graph
    from boltzoo.agents.frameworks import LangGraphPolicy

    env = boltzoo.make("sql-v0", **ENV_KWARGS).unwrapped
    gold = {task.question: task.gold_sql for task in env.tasks[:4]}
    index = {task.question: i for i, task in enumerate(env.tasks[:4])}

    def model(turn):
        messages = turn.observation["messages"]
        system, user = messages[0]["content"], messages[-1]["content"]
        question = next(q for q in gold if q in user)
        i = index[question]
        if system == CHECKER_SYSTEM_PROMPT:  # task 3: only its rewrite (the gold query)
            accepted = i in (0, 1) or (i == 3 and gold[question] in user)
            return "VERDICT: CORRECT" if accepted else "VERDICT: INCORRECT - no"
        if system == REWRITER_SYSTEM_PROMPT:
            return f"```sql\n{gold[question] if i == 3 else WRONG}\n```"
        return f"```sql\n{gold[question] if i in (0, 2) else WRONG}\n```"

    with Gateway(ScriptedPolicy(model, smollm2_tokenizer, name="scripted")) as gateway:
        policy = LangGraphPolicy(langgraph_sql_graph("sql-v0", "writer", max_rounds=2), gateway)
        episodes = boltzoo.rollout(
            "sql-v0", {"writer": policy}, tasks=[0, 1, 2, 3], progress=False, **ENV_KWARGS
        )
    path = save_episodes(tmp_path / "episodes.jsonl", episodes)

    result = load_probe().probe([path], ENV_KWARGS)

    assert result["episodes"] == 4 and result["success_rate"] == 0.5  # tasks 0 and 3
    assert result["verdicts"] == {
        "round 0, query right, CORRECT": 1,  # task 0
        "round 0, query right, INCORRECT": 1,  # task 2: a right query rejected
        "round 0, query wrong, CORRECT": 1,  # task 1: a wrong query let through
        "round 0, query wrong, INCORRECT": 1,  # task 3
        "round 1, query right, CORRECT": 1,  # task 3's fix
        "round 1, query wrong, INCORRECT": 1,  # task 2's broken rewrite
    }
    # task 2's second rewrite is final and goes unchecked: a rewrite, no verdict
    assert result["rewrites"] == {"broke": 1, "fixed": 1, "still wrong": 1}
