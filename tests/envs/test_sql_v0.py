"""sql-v0: the PettingZoo contract, the writer/checker/rewriter protocol, data, the sandbox."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import pytest
from pettingzoo.test import api_test

import boltzoo
from boltzoo.agents import NaivePolicy, OraclePolicy

TEAM = ("writer", "checker", "rewriter")
VARIANTS = [TEAM, ("writer",)]


def file_hash(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.mark.parametrize("agents", VARIANTS)
@pytest.mark.slow
def test_pettingzoo_api_test_passes(agents):
    api_test(boltzoo.make("boltzoo/sql-v0", agents=agents), num_cycles=100)


@pytest.mark.parametrize("split", ["test", "test_unseen"])
@pytest.mark.parametrize("agents", VARIANTS)
@pytest.mark.slow
def test_oracle_scores_one_on_every_bundled_test_task(split, agents):
    env = boltzoo.make("sql-v0", split=split)
    episodes = boltzoo.rollout(
        "sql-v0",
        {a: OraclePolicy() for a in agents},
        tasks=range(env.unwrapped.num_tasks),
        split=split,
        agents=agents,
        progress=False,
    )
    assert len(episodes) >= 150
    assert not [e.error for e in episodes if e.failed]
    assert all(e.success and e.score == 1.0 for e in episodes)


def test_oracle_scores_one_on_a_spider_directory(spider_dir):
    env = boltzoo.make("sql-v0", dataset="spider", path=str(spider_dir), split="dev")
    assert [t.question for t in env.unwrapped.tasks][0] == "How many customers live in Oslo?"
    episodes = boltzoo.rollout(
        "sql-v0",
        {a: OraclePolicy() for a in TEAM},
        tasks=[0, 1, 2],
        dataset="spider",
        path=str(spider_dir),
        split="dev",
        progress=False,
    )
    assert [e.score for e in episodes] == [1.0, 1.0, 1.0]


def test_wrong_query_scores_zero_and_a_reordered_one_still_scores(spider_dir):
    env = boltzoo.make("sql-v0", dataset="spider", path=str(spider_dir), agents=("writer",))
    env.reset(options={"task_index": 0})
    env.step("```sql\nSELECT count(*) FROM customer\n```")  # 3, not 2
    assert env.unwrapped.episode.score == 0.0 and env.infos["writer"]["success"] is False
    env.reset(options={"task_index": 2})  # gold has no ORDER BY: any order matches
    env.step("SELECT name FROM customer ORDER BY name DESC")
    assert env.unwrapped.episode.success is True
    env.reset(options={"task_index": 1})  # gold orders: the order must match
    env.step(
        "SELECT c.name, sum(p.amount) AS total FROM customer c JOIN purchase p "
        "ON p.customer_id = c.id GROUP BY c.id ORDER BY total ASC"
    )
    assert env.unwrapped.episode.success is False


def test_checker_sees_the_result_and_rewriter_the_feedback(spider_dir):
    env = boltzoo.make("sql-v0", dataset="spider", path=str(spider_dir))
    env.reset(options={"task_index": 0})
    env.step("```sql\nSELECT count(*) FROM customer\n```")
    checker_view = env.observe("checker")["messages"][-1]["content"]
    assert "How many customers live in Oslo?" in checker_view
    assert "SELECT count(*) FROM customer" in checker_view and "3" in checker_view
    assert "CREATE TABLE" in checker_view
    env.step("VERDICT: INCORRECT - it counts every customer, not those in Oslo")
    assert env.agent_selection == "rewriter"
    rewriter_view = env.observe("rewriter")["messages"][-1]["content"]
    assert "not those in Oslo" in rewriter_view
    env.step("SELECT count(*) FROM customer WHERE city = 'Oslo'")
    assert env.agent_selection == "checker"
    env.step("looks right")  # no verdict line and no negative word: accepted
    assert env.unwrapped.episode.success is True
    assert [s.agent for s in env.unwrapped.episode.steps] == [
        "writer",
        "checker",
        "rewriter",
        "checker",
    ]
    assert env.unwrapped.episode.returns() == {a: 1.0 for a in TEAM}


def test_rounds_run_out_and_the_last_query_is_final(spider_dir):
    env = boltzoo.make("sql-v0", dataset="spider", path=str(spider_dir), max_rounds=2)
    env.reset(options={"task_index": 0})
    actions = iter(
        [
            "SELECT 1",
            "VERDICT: INCORRECT - no",
            "SELECT 2",
            "VERDICT: INCORRECT - no",
            "SELECT count(*) FROM customer WHERE city = 'Oslo'",
        ]
    )
    for _agent in env.agent_iter():
        _, _, term, trunc, _ = env.last()
        env.step(None if term or trunc else next(actions))
    episode = env.unwrapped.episode
    assert [s.agent for s in episode.steps][-1] == "rewriter" and len(episode.steps) == 5
    assert episode.terminated and episode.success is True
    assert episode.steps[-1].info["rounds"] == 2


def test_tool_reward_pays_queries_that_run_without_changing_score(spider_dir):
    kwargs = dict(dataset="spider", path=str(spider_dir), agents=("writer",))
    plain = boltzoo.make("sql-v0", **kwargs)
    shaped = boltzoo.make("sql-v0", tool_reward=0.2, **kwargs)
    for env in (plain, shaped):
        env.reset(options={"task_index": 0})
        env.step("SELECT count(*) FROM customer")
    assert plain.unwrapped.episode.score == shaped.unwrapped.episode.score == 0.0
    assert shaped.unwrapped.episode.returns() == {"writer": pytest.approx(0.2)}


ATTACKS = [
    "DROP TABLE customer",
    "DELETE FROM customer",
    "UPDATE customer SET name = 'x'",
    "INSERT INTO customer VALUES (9, 'x', 'y')",
    "CREATE TABLE evil (x)",
    "ATTACH DATABASE 'evil.sqlite' AS evil",
    "PRAGMA writable_schema=1",
    "SELECT load_extension('x')",
    "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r",
    # 3**10 * 4**10 (about 6e10) rows: only the time limit stops it
    "SELECT count(*) FROM "
    + ", ".join(f"{t} t{i}" for i, t in enumerate(["customer", "purchase"] * 10)),
    "SELECT 1; DROP TABLE customer",
    "SELECT \x00\x01\xff garbage \x89PNG",
]


@pytest.mark.parametrize("attack", ATTACKS)
@pytest.mark.slow
def test_sandbox_attacks_come_back_as_errors_and_leave_the_database_unchanged(spider_dir, attack):
    database = spider_dir / "database" / "shop" / "shop.sqlite"
    before = file_hash(database)
    env = boltzoo.make("sql-v0", dataset="spider", path=str(spider_dir))
    env.reset(options={"task_index": 0})
    started = time.perf_counter()
    env.step(f"```sql\n{attack}\n```")
    assert time.perf_counter() - started < 3.0
    view = env.observe("checker")["messages"][-1]["content"]
    assert "error:" in view
    assert env.infos["writer"]["query_errors"] == 1
    assert file_hash(database) == before
    assert not (Path.cwd() / "evil.sqlite").exists()
    # The episode goes on, and the database still answers.
    env.step("VERDICT: INCORRECT - that query failed")
    env.step("SELECT count(*) FROM customer WHERE city = 'Oslo'")
    assert "2" in env.observe("checker")["messages"][-1]["content"]


def test_naive_policy_runs_and_is_worse_than_oracle():
    episodes = boltzoo.rollout(
        "sql-v0", {a: NaivePolicy() for a in TEAM}, tasks=range(60), split="test", progress=False
    )
    assert not any(e.failed for e in episodes)
    assert sum(e.score for e in episodes) / len(episodes) < 0.5


def test_observation_shows_schema_with_sample_rows_and_never_the_gold_query():
    env = boltzoo.make("sql-v0", split="test", schema_rows=2)
    for index in range(0, env.unwrapped.num_tasks, 25):
        env.reset(options={"task_index": index})
        text = env.observe("writer")["messages"][-1]["content"]
        assert "CREATE TABLE" in text and env.unwrapped.current_task.question in text
        assert env.unwrapped.current_task.gold_sql not in text


def test_database_override_serves_the_same_tasks_from_another_url(spider_dir, tmp_path):
    import shutil

    copy = tmp_path / "copy.sqlite"
    shutil.copy(spider_dir / "database" / "shop" / "shop.sqlite", copy)
    env = boltzoo.make(
        "sql-v0",
        dataset="spider",
        path=str(spider_dir),
        database=f"sqlite:///{copy}",
        agents=("writer",),
    )
    env.reset(options={"task_index": 0})
    env.step("SELECT count(*) FROM customer WHERE city = 'Oslo'")
    assert env.unwrapped.episode.success is True
    assert env.unwrapped.database_of(env.unwrapped.current_task) == f"sqlite:///{copy}"


def test_prompts_replace_the_writers_system_prompt_and_are_recorded():
    env = boltzoo.make("sql-v0", split="test", prompts={"writer": "Write SQLite."})
    env.reset(options={"task_index": 0})
    assert env.observe("writer")["messages"][0] == {"role": "system", "content": "Write SQLite."}
    env.step("```sql\nSELECT 1\n```")
    checker_prompt = env.observe("checker")["messages"][0]["content"]
    assert checker_prompt == env.unwrapped.default_prompts["checker"]
    recorded = env.unwrapped.episode.metadata["prompts"]
    assert recorded["writer"] == "Write SQLite." and set(recorded) == {
        "writer",
        "checker",
        "rewriter",
    }


def test_process_wide_caches_are_bounded_and_keep_the_recently_used():
    import threading

    from boltzoo.envs.data.cache import BoundedCache

    cache = BoundedCache(3)
    made = []
    for key in ["a", "b", "c", "a", "d"]:  # "a" used again: "b" is the least recently used
        cache.get(key, lambda key=key: made.append(key) or key.upper())
    assert made == ["a", "b", "c", "d"] and len(cache) == 3
    assert cache.get("b", lambda: "made again") == "made again"
    assert cache.get("a", lambda: "not made") == "A"

    values = BoundedCache(1000)

    def fill(i):
        for j in range(200):
            values.get((i, j), lambda j=j: j)

    threads = [threading.Thread(target=fill, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(values) == 800


def test_oracle_call_judges_the_query_under_review_by_running_it():
    # A framework agent's calls (the SQL graph's nodes) are answered from the chat it sent:
    # the writer and rewriter write the gold query; the checker runs the query under review
    # (the last ```sql block before "Result:", not a query in the question or the schema) and
    # accepts exactly the queries whose rows are the gold query's.
    env = boltzoo.make("sql-v0", split="test", agents=("writer",), schema_rows=0).unwrapped
    env.reset(options={"task_index": 3})
    gold = env.current_task.gold_sql
    answer = f"```sql\n{gold}\n```"
    assert env.oracle_call("writer", []) == env.oracle_call("rewriter", []) == answer

    def review(sql: str, result: str = "(rows)") -> list[dict[str, str]]:
        task = env.observe("writer")["messages"][-1]["content"]
        block = f"Query:\n```sql\n{sql}\n```\n\nResult:\n{result}"
        return [
            {"role": "system", "content": "Check the query."},
            {"role": "user", "content": f"{task}\n\n{block}"},
        ]

    assert env.oracle_call("checker", review(gold)) == "VERDICT: CORRECT"
    # the same rows in another order, where the gold query does not order them: still right
    assert "ORDER BY" not in gold
    reordered = review(f"SELECT * FROM ({gold}) ORDER BY 1 DESC")
    assert env.oracle_call("checker", reordered) == "VERDICT: CORRECT"
    wrong = env.oracle_call("checker", review(f"SELECT * FROM ({gold}) LIMIT 0"))
    assert wrong == "VERDICT: INCORRECT - the result does not answer the question."
    # a result text that looks like a query does not stand for the query under review
    fooled = review("SELECT 1 WHERE 0", result=f"```sql\n{gold}\n```")
    assert env.oracle_call("checker", fooled).startswith("VERDICT: INCORRECT")
    failing = env.oracle_call("checker", review("SELECT nope FROM nowhere"))
    assert failing == "VERDICT: INCORRECT - the query fails."
