"""What the SQL task modules share (sql_tasks: the bundled databases and templates;
sql_synthetic: the synthetic schemas): the task record, building and opening SQLite files, when a
gold query has an answer, SQL string literals, and the name pools generated rows draw from."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from boltzoo.envs.data.files import bundled_table

__all__ = [
    "FIRST_NAMES",
    "LAST_NAMES",
    "MAX_ROWS",
    "US_CITIES",
    "WORLD_CITIES",
    "SQLTask",
    "build_atomically",
    "connect_read_only",
    "has_answer",
    "quote",
]

# A gold result with more rows than this is redrawn (questions should have readable answers).
MAX_ROWS = 100


@dataclass(frozen=True)
class SQLTask:
    """One text-to-SQL question.

    Attributes:
        task_id: Stable id: ``"{db_id}-{8 hex of sha256(db_id, question)}"`` for generated
            tasks, ``"spider-{split}-{row index}"`` for Spider rows.
        question: The natural-language question.
        gold_sql: A SQLite query whose result is the answer (execution accuracy compares
            results). Queries with ORDER BY order totally; LIMIT only follows a total order.
        db_id: ``"chinook"``, ``"university"``, ``"retail"``, ``"hospital"`` or a Spider db_id.
        database: Absolute path of the SQLite file.
        template: ``"<db>/<name>"`` for generated tasks, None for Spider rows.
        split: ``"train"``, ``"test"``, ``"test_unseen"``, or the Spider split.
    """

    task_id: str
    question: str
    gold_sql: str
    db_id: str
    database: str
    template: str | None
    split: str


def build_atomically(target: Path, fill: Callable[[sqlite3.Connection], None]) -> None:
    """Run ``fill`` on a fresh database in a temp file next to ``target``, then move it there."""
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temp_name = tempfile.mkstemp(
        prefix=f".{target.name}.", suffix=".tmp", dir=target.parent
    )
    os.close(handle)
    try:
        connection = sqlite3.connect(temp_name)
        try:
            connection.execute("PRAGMA journal_mode = OFF")
            connection.execute("PRAGMA synchronous = OFF")
            fill(connection)
            connection.commit()
            problems = connection.execute("PRAGMA foreign_key_check").fetchall()
            if problems:
                raise RuntimeError(f"{target.name}: foreign key violations, e.g. {problems[:3]}")
        finally:
            connection.close()
        os.replace(temp_name, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp_name)
        raise


def connect_read_only(path: Path | str) -> sqlite3.Connection:
    """Open a SQLite file read-only."""
    return sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)


def quote(text: str) -> str:
    """A SQL string literal."""
    return "'" + str(text).replace("'", "''") + "'"


def has_answer(connection: sqlite3.Connection, sql: str) -> bool:
    """1 to MAX_ROWS rows, and not a lone NULL/0 (an empty aggregate)."""
    rows = connection.execute(sql).fetchmany(MAX_ROWS + 1)
    if not rows or len(rows) > MAX_ROWS:
        return False
    return not (len(rows) == 1 and all(value is None or value == 0 for value in rows[0]))


_TABLES = bundled_table("names.json")
FIRST_NAMES = _TABLES["first_names"]
LAST_NAMES = _TABLES["last_names"]
US_CITIES = _TABLES["us_cities"]
# (city, country, weight)
WORLD_CITIES = _TABLES["world_cities"]
