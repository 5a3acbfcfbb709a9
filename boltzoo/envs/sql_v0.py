r"""sql-v0: text-to-SQL with a writer, a checker and a rewriter (the paper's Spider workflow).

| | |
|---|---|
| Creation | ``boltzoo.make("boltzoo/sql-v0")`` (or ``pettingzoo.make("aec", ...)``, ``env()``) |
| Agents | ``writer``, ``checker``, ``rewriter``; ``agents=("writer",)`` is one-shot |
| API | AEC (turn by turn) |
| Action | text (``str`` or ``Completion``) |
| Observation | ``{"agent", "task_id", "messages"}``: the chat of the agent's next LLM call |
| Single-agent view | ``boltzoo.make_gym("boltzoo/sql-v0", agent="rewriter", policies={...})`` |

Create it with every argument at its default::

    env = boltzoo.make("boltzoo/sql-v0", split="train", agents=("writer", "checker", "rewriter"),
                       max_rounds=3, schema_rows=3, tool_reward=0.0)

## Agents and actions

``writer`` sees the question and the database schema (``CREATE TABLE`` statements, each with
``schema_rows`` example rows) and writes one SQL query. ``checker`` sees the question, the
schema, the query and its execution result (or error) and gives a verdict, one line:
``VERDICT: CORRECT`` or ``VERDICT: INCORRECT - <what is wrong>``. The verdict is parsed
leniently (the last verdict line wins; without one, the words "incorrect"/"wrong" mean
INCORRECT); an unparseable verdict counts as CORRECT. On INCORRECT, ``rewriter`` sees the same
and the checker's feedback and writes a better query, which the env executes and the checker
checks again; up to ``max_rounds`` check/rewrite rounds, after which the last query is final.
``agents=("writer",)``: the writer's query is final.

The SQL in an action is its last fenced block (```` ```sql ... ``` ````); without one, the text
from the first ``SELECT``/``WITH``; without that, the whole text. The env executes every query
in a sandbox: a read-only connection and an authorizer that refuses writes, ``ATTACH``,
writable ``PRAGMA``s, ``load_extension`` and more than one statement; a time limit per query;
limits on rows and bytes returned. A refused, failing or runaway query comes back as a clear
error in the next observation, and the database's bytes never change
(``boltzoo.envs.tools.sql``).

## Rewards and infos

The task reward, paid to every agent at the end: 1.0 when the final query's result equals the
gold query's result (execution accuracy: rows compared as a multiset, in order only when the
gold query orders; numbers with a float tolerance), else 0. ``tool_reward`` (default 0, off)
pays the writer or rewriter that much for each query that executes without error; it never
changes ``score`` or ``success``. ``infos`` hold ``queries``, ``query_errors`` and ``rounds``,
and at the end ``success``, ``score`` and ``sql`` (the final query).

## Arguments

* ``dataset``: ``"generated"`` (default: the bundled Chinook database and generated databases of
  other domains, with generated questions), ``"spider"`` (a Spider-format directory ``path``:
  ``tables.json``, ``dev.json`` / ``train_spider.json``, ``database/<db_id>/<db_id>.sqlite``).
* ``tasks``: your own questions instead of a data set: rows ``{"question", "query",
  "database"}`` (optional ``id``): ``query`` is the gold SQLite query (it must compile),
  ``database`` a SQLite file (relative to the rows file) or a bundled database's name; as a
  list, a JSONL or JSON-list file, or ``{"train": ..., "test": ...}`` (one file or list is the
  ``"train"`` split only).
* ``split``: generated: ``"train"``, ``"test"`` (same templates, other instances) or
  ``"test_unseen"`` (templates and a database never seen in training); Spider: ``"dev"`` or
  ``"train"``, all rows of that file in order.
* ``synthetic_databases``: generated train split only: adds the tasks of that many synthetic
  databases (``boltzoo.envs.data.sql_synthetic``: other schemas to read, generic questions);
  other splits and datasets ignore it. Default 0.
* ``synthetic_tables``: 2 (default: a parent and a child table, 28 tasks each) or 4 (a unit,
  its staff, the people they serve and the events between them: joins of up to four tables,
  months and years of dates; 42 tasks each).
* ``synthetic_kinds``: ``"base"`` (default) or ``"extended"`` (four tables only): 26 more tasks
  on each database, of the shapes the base kinds leave out (NOT IN, IN through joins,
  INTERSECT, comparisons with an average, the best month, the largest row, ...); the base
  tasks stay the same.
* ``database``: an SQLAlchemy URL (or file path) that replaces every task's database, e.g. the
  same Chinook served by PostgreSQL.
* ``agents``, ``max_rounds`` (default 3), ``max_turns`` (default ``1 + 2 * max_rounds``),
  ``schema_rows`` (example rows per table in the schema, default 3), ``query_time_limit_s``
  (1.0), ``max_result_rows`` (1,000), ``tool_reward``, ``tool_reward_on_success``,
  ``prompts`` (system prompts by agent, e.g. ``{"writer": "..."}``, replacing the defaults;
  recorded in ``episode.metadata["prompts"]``), ``render_mode``, ``max_action_chars``.

## Version history

* v0: first version.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

from boltzoo.envs.base import (
    DEFAULT_MAX_ACTION_CHARS,
    LLMTurnEnv,
    OrderEnforcing,
    ToolSpec,
    string_parameters,
)
from boltzoo.envs.data.cache import BoundedCache
from boltzoo.envs.data.files import split_source
from boltzoo.envs.data.loaders import load_spider, sql_rows
from boltzoo.envs.data.sql_synthetic import KIND_SETS, TABLE_COUNTS, synthetic_tasks
from boltzoo.envs.data.sql_tasks import SQLTask, generate_tasks
from boltzoo.envs.protocol import extract_sql, parse_verdict
from boltzoo.envs.tools.sql import QueryResult, SQLSandbox, gold_is_ordered, results_match
from boltzoo.errors import DatasetError
from boltzoo.tracing import span_attributes

WRITER, CHECKER, REWRITER = "writer", "checker", "rewriter"

WRITER_SYSTEM_PROMPT = (
    "You write SQL for a question about a database. Answer with one SQLite query in a "
    "```sql code block, and nothing else."
)
CHECKER_SYSTEM_PROMPT = (
    "You check whether an SQL query answers a question. Look at the query and its result. "
    "Reply with one line: 'VERDICT: CORRECT' if it answers the question, or "
    "'VERDICT: INCORRECT - <what is wrong>' if it does not."
)
REWRITER_SYSTEM_PROMPT = (
    "You fix SQL queries. Given a question, a query, its result and a reviewer's feedback, "
    "write a better query. Answer with one SQLite query in a ```sql code block, and nothing else."
)

# Sandboxes and gold results are shared by every env in the process: a rollout runs many envs
# over the same databases, and a gold query runs once per (database, query).
_SANDBOXES: dict[tuple, SQLSandbox] = {}
_GOLD = BoundedCache(4096)  # (database, gold query) -> QueryResult
_LOCK = threading.Lock()


def shared_sandbox(database: str, time_limit_s: float, max_rows: int) -> SQLSandbox:
    """Return the process-wide sandbox for ``database`` with these limits (opened once)."""
    key = (str(database), time_limit_s, max_rows)
    with _LOCK:
        if key not in _SANDBOXES:
            _SANDBOXES[key] = SQLSandbox(database, time_limit_s=time_limit_s, max_rows=max_rows)
        return _SANDBOXES[key]


class raw_env(LLMTurnEnv):
    """sql-v0 as a raw AEC env (``env()`` adds PettingZoo's order-enforcing wrapper)."""

    metadata = {"render_modes": ["ansi", "human"], "name": "sql_v0", "is_parallelizable": False}
    env_id = "boltzoo/sql-v0"
    agent_variants = ((WRITER, CHECKER, REWRITER), (WRITER,))
    default_prompts = {
        WRITER: WRITER_SYSTEM_PROMPT,
        CHECKER: CHECKER_SYSTEM_PROMPT,
        REWRITER: REWRITER_SYSTEM_PROMPT,
    }
    tools = (
        ToolSpec(
            "execute_sql",
            "Run one read-only SQL query on the task's database and see its result.",
            string_parameters(query="one SQLite SELECT query"),
        ),
    )

    def __init__(
        self,
        *,
        dataset: str = "generated",
        split: str | None = None,
        path: str | os.PathLike | None = None,
        tasks: Any = None,
        database: str | None = None,
        agents: Sequence[str] = (WRITER, CHECKER, REWRITER),
        max_rounds: int = 3,
        max_turns: int | None = None,
        schema_rows: int = 3,
        query_time_limit_s: float = 1.0,
        max_result_rows: int = 1000,
        tool_reward: float = 0.0,
        tool_reward_on_success: bool = False,
        prompts: dict[str, str] | None = None,
        render_mode: str | None = None,
        max_action_chars: int = DEFAULT_MAX_ACTION_CHARS,
        synthetic_databases: int = 0,
        synthetic_tables: int = 2,
        synthetic_kinds: str = "base",
    ):
        if max_rounds < 0:
            raise ValueError(f"max_rounds must be 0 or more, got {max_rounds}")
        super().__init__(
            agents=agents,
            max_turns=max_turns if max_turns is not None else 1 + 2 * max_rounds,
            render_mode=render_mode,
            max_action_chars=max_action_chars,
            tool_reward=tool_reward,
            tool_reward_on_success=tool_reward_on_success,
            prompts=prompts,
        )
        self.max_rounds = int(max_rounds)
        self.schema_rows = int(schema_rows)
        self.query_time_limit_s = float(query_time_limit_s)
        self.max_result_rows = int(max_result_rows)
        self.database_override = None if database is None else str(database)
        self.tasks: list[SQLTask] = load_sql_tasks(dataset, split, path, tasks)
        if synthetic_databases < 0:
            raise ValueError(f"synthetic_databases must be 0 or more, got {synthetic_databases}")
        if synthetic_tables not in TABLE_COUNTS:
            raise ValueError(
                f"synthetic_tables must be one of {TABLE_COUNTS}, got {synthetic_tables}"
            )
        extended_on_two = synthetic_kinds == "extended" and synthetic_tables != 4
        if synthetic_kinds not in KIND_SETS or extended_on_two:
            raise ValueError(
                f"synthetic_kinds must be one of {KIND_SETS} ('extended' with synthetic_tables=4),"
                f" got {synthetic_kinds!r} with synthetic_tables={synthetic_tables}"
            )
        if synthetic_databases and dataset == "generated" and (split or "train") == "train":
            self.tasks += synthetic_tasks(
                synthetic_databases, tables=synthetic_tables, kinds=synthetic_kinds
            )
        self._schemas: dict[str, str] = {}

    # --- helpers ---------------------------------------------------------------------------

    def database_of(self, task: SQLTask) -> str:
        """Return the database (path or URL) that ``task``'s queries run against."""
        return self.database_override or task.database

    def _sandbox(self) -> SQLSandbox:
        return shared_sandbox(
            self.database_of(self.current_task), self.query_time_limit_s, self.max_result_rows
        )

    def gold_result(self, task: SQLTask) -> QueryResult:
        """Return the gold query's result for ``task``, computed once per process."""
        database = self.database_of(task)

        def run() -> QueryResult:
            # Gold queries get a generous time limit: they are ours, and must not be cut.
            gold = shared_sandbox(database, 30.0, 1_000_000).execute(task.gold_sql)
            if not gold.ok:
                raise DatasetError(
                    f"the gold query of task {task.task_id} fails on {database}: {gold.error}"
                )
            return gold

        return _GOLD.get((database, task.gold_sql), run)

    def _schema(self) -> str:
        database = self.database_of(self.current_task)
        if database not in self._schemas:
            self._schemas[database] = self._sandbox().schema(sample_rows=self.schema_rows)
        return self._schemas[database]

    # --- episode ---------------------------------------------------------------------------

    def _start_episode(self) -> str:
        self._sql: str | None = None  # the latest query
        self._result: QueryResult | None = None
        self._feedback = ""
        self._rounds = 0  # check/rewrite rounds done
        for agent in self.agents:
            self.infos[agent].update(queries=0, query_errors=0, rounds=0)
        return WRITER

    def _context(self) -> str:
        task: SQLTask = self.current_task
        return f"Database schema:\n{self._schema()}\n\nQuestion: {task.question}"

    def _query_block(self) -> str:
        result = self._result.to_text() if self._result else "(not run)"
        return f"Query:\n```sql\n{self._sql}\n```\n\nResult:\n{result}"

    def _messages(self, agent: str) -> list[dict[str, str]]:
        if agent == WRITER:
            return [
                {"role": "system", "content": self.prompts[WRITER]},
                {"role": "user", "content": self._context()},
            ]
        if agent == CHECKER:
            return [
                {"role": "system", "content": self.prompts[CHECKER]},
                {"role": "user", "content": f"{self._context()}\n\n{self._query_block()}"},
            ]
        return [
            {"role": "system", "content": self.prompts[REWRITER]},
            {
                "role": "user",
                "content": f"{self._context()}\n\n{self._query_block()}\n\n"
                f"Reviewer's feedback: {self._feedback or 'the query is wrong.'}",
            },
        ]

    def _play(self, agent: str, text: str) -> str | None:
        if agent in (WRITER, REWRITER):
            self._run_query(agent, extract_sql(text))
            if agent == REWRITER:
                self._rounds += 1
                for a in self.agents:
                    self.infos[a]["rounds"] = self._rounds
            if CHECKER not in self.agents or self._rounds >= self.max_rounds:
                return self._end()
            return CHECKER
        accepted, self._feedback = parse_verdict(text)
        self.transcript.append(("env", "accepted" if accepted else "rejected"))
        return self._end() if accepted else REWRITER

    def _execute(self, sql: str) -> QueryResult:
        """Run one query in the sandbox, in a span, counted in every agent's infos."""
        with self._tool_span("sql", query=sql) as span:
            result = self._sandbox().execute(sql)
            span.set_attributes(
                span_attributes(ok=result.ok, rows=len(result.rows), error=result.error)
            )
        for a in self.agents:
            self.infos[a]["queries"] += 1
            self.infos[a]["query_errors"] += not result.ok
        self.transcript.append(("database", result.to_text(max_rows=5, max_chars=500)))
        return result

    def _run_query(self, agent: str, sql: str) -> None:
        self._sql = sql
        self._result = self._execute(sql)
        self._pay_tool_reward(agent, int(self._result.ok))

    def _run_tool(self, agent: str, name: str, arguments: dict[str, Any]) -> tuple[str, int]:
        result = self._execute(str(arguments["query"]))
        return result.to_text(), int(result.ok)

    def _final_score(self) -> bool:
        return self._answers(self._result)

    def _answers(self, result: QueryResult | None) -> bool:
        """Return whether ``result`` (a query's, or none) is the gold query's result."""
        task: SQLTask = self.current_task
        if result is None or not result.ok:
            return False
        gold = self.gold_result(task)
        return results_match(result.rows, gold.rows, ordered=gold_is_ordered(task.gold_sql))

    def _end(self) -> None:
        success = self._final_score()
        self._finish(score=float(success), success=success, reward=float(success))
        for a in self.agents:
            self.infos[a]["sql"] = self._sql
        return None

    def _finish_truncated(self) -> None:
        success = self._final_score()  # the last query stands, as when the rounds run out
        self._finish(score=float(success), success=success, reward=float(success))
        for a in self.agents:
            self.infos[a]["sql"] = self._sql

    # --- scripted policies (tests and baselines) -------------------------------------------

    def gold_texts(self) -> list[str]:
        """Return the gold query (the task as first shown must not hold it)."""
        return [self.current_task.gold_sql]

    def oracle_action(self, agent: str) -> str:
        """Return the action of an agent that knows the gold query (reads the task, not obs)."""
        task: SQLTask = self.current_task
        if agent == CHECKER:
            return _verdict(self._result, self._final_score())
        return f"```sql\n{task.gold_sql}\n```"

    def oracle_call(self, agent: str, messages: list[dict[str, Any]]) -> str:
        """Return the oracle's answer to one model call of a framework agent playing ``agent``
        (a node of the SQL graph, or an env agent; ``messages``: the chat the framework sent).

        The writer and the rewriter answer the gold query; the checker runs the query under
        review (the last ```` ```sql ```` block before the chat's last ``Result:``, the query
        block both the env and the graph write) and judges its result against the gold one,
        so its verdicts on the graph's own queries are right whoever wrote them."""
        if agent != CHECKER:
            return self.oracle_action(agent)
        chat = next((m for m in reversed(messages) if m.get("role") == "user"), {})
        text = str(chat.get("content") or "")
        under_review = extract_sql(text.rsplit("\n\nResult:", 1)[0])
        result = self._sandbox().execute(under_review)
        return _verdict(result, self._answers(result))

    def naive_action(self, agent: str) -> str:
        """Return a baseline action: every row of the first table; the checker accepts all."""
        if agent == CHECKER:
            return "VERDICT: CORRECT"
        table = self._sandbox().table_names()[0]
        return f'```sql\nSELECT * FROM "{table}"\n```'


def _verdict(result: QueryResult | None, right: bool) -> str:
    """Return the checker's verdict on a query's ``result``, with the oracle's reason."""
    if right:
        return "VERDICT: CORRECT"
    if result is not None and not result.ok:
        return "VERDICT: INCORRECT - the query fails."
    return "VERDICT: INCORRECT - the result does not answer the question."


def load_sql_tasks(
    dataset: str, split: str | None, path: str | os.PathLike | None, tasks: Any = None
) -> list[SQLTask]:
    """Return the tasks of a sql-v0 data set: a generated split, a user's rows or a Spider-format
    directory."""
    if tasks is not None:
        if dataset != "generated" or path is not None:
            raise DatasetError("tasks= are the rows themselves: leave dataset= and path= out")
        return sql_rows(split_source(tasks, split, "sql-v0 tasks="), split or "train")
    try:
        if dataset == "generated":
            if path is not None:
                raise DatasetError("path= is for dataset='spider', not the generated set")
            return generate_tasks(split or "train")
        if dataset == "spider":
            if path is None:
                raise DatasetError(
                    "dataset='spider' reads a Spider-format directory: pass path=DIR"
                )
            return load_spider(path, split or "dev")
    except DatasetError:
        raise
    except ValueError as error:
        raise DatasetError(str(error)) from None
    raise DatasetError(f"unknown sql-v0 dataset {dataset!r}; choose 'generated' or 'spider'")


def env(**kwargs: Any) -> OrderEnforcing:
    """Return sql-v0 wrapped as PettingZoo wraps its own envs (order enforcing)."""
    return OrderEnforcing(raw_env(**kwargs))
