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


FIRST_NAMES = (
    "James", "Mary", "John", "Patricia", "Robert", "Jennifer", "Michael", "Linda", "William",
    "Elizabeth", "David", "Barbara", "Richard", "Susan", "Joseph", "Jessica", "Thomas", "Sarah",
    "Charles", "Karen", "Daniel", "Nancy", "Matthew", "Lisa", "Anthony", "Margaret", "Mark",
    "Sandra", "Steven", "Ashley", "Andrew", "Emily", "Joshua", "Donna", "Kevin", "Michelle",
    "Brian", "Carol", "George", "Amanda", "Wei", "Mei", "Hiroshi", "Yuki", "Raj", "Priya",
    "Ahmed", "Fatima", "Carlos", "Sofia", "Luca", "Giulia", "Pierre", "Camille", "Lars",
    "Ingrid", "Olumide", "Amara", "Dmitri", "Anastasia", "Mateo", "Valentina", "Kwame", "Aisha",
    "Min-jun", "Seo-yeon", "Liam", "Olivia", "Noah", "Emma",
)  # fmt: skip
LAST_NAMES = (
    "Smith", "Johnson", "Williams", "Brown", "Jones", "Garcia", "Miller", "Davis", "Rodriguez",
    "Martinez", "Hernandez", "Lopez", "Gonzalez", "Wilson", "Anderson", "Thomas", "Taylor",
    "Moore", "Jackson", "Martin", "Lee", "Perez", "Thompson", "White", "Harris", "Sanchez",
    "Clark", "Ramirez", "Lewis", "Robinson", "Walker", "Young", "Allen", "King", "Wright",
    "Scott", "Torres", "Nguyen", "Hill", "Flores", "Green", "Adams", "Nelson", "Baker", "Hall",
    "Rivera", "Campbell", "Mitchell", "Carter", "Roberts", "Chen", "Wang", "Kim", "Patel",
    "Singh", "Tanaka", "Sato", "Müller", "Schmidt", "Rossi", "Dubois", "O'Brien", "Kowalski",
    "Novak", "Okafor", "Mensah", "Ivanova", "Silva", "Santos", "Jensen",
)  # fmt: skip
US_CITIES = (
    "Boston", "Springfield", "Portland", "Denver", "Austin", "Chicago", "Seattle", "Atlanta",
    "Phoenix", "Madison", "Columbus", "Nashville", "Raleigh", "Sacramento", "Pittsburgh",
    "Minneapolis", "Richmond", "Albany", "Tucson", "Omaha", "Burlington", "Salem", "Providence",
    "Hartford", "Baltimore",
)  # fmt: skip
# (city, country, weight)
WORLD_CITIES = (
    ("New York", "USA", 6), ("Chicago", "USA", 4), ("Austin", "USA", 3), ("Seattle", "USA", 3),
    ("Toronto", "Canada", 4), ("Vancouver", "Canada", 2), ("London", "United Kingdom", 5),
    ("Manchester", "United Kingdom", 2), ("Dublin", "Ireland", 2), ("Paris", "France", 4),
    ("Lyon", "France", 2), ("Berlin", "Germany", 4), ("Munich", "Germany", 3),
    ("Madrid", "Spain", 3), ("Barcelona", "Spain", 2), ("Rome", "Italy", 2), ("Milan", "Italy", 2),
    ("Amsterdam", "Netherlands", 3), ("Stockholm", "Sweden", 2), ("Oslo", "Norway", 1),
    ("Warsaw", "Poland", 2), ("Lisbon", "Portugal", 1), ("Sydney", "Australia", 3),
    ("Melbourne", "Australia", 2), ("Auckland", "New Zealand", 1), ("Tokyo", "Japan", 3),
    ("Osaka", "Japan", 1), ("Seoul", "South Korea", 2), ("Mumbai", "India", 2),
    ("Bangalore", "India", 2), ("Sao Paulo", "Brazil", 2), ("Mexico City", "Mexico", 2),
    ("Buenos Aires", "Argentina", 1), ("Cape Town", "South Africa", 1), ("Nairobi", "Kenya", 1),
    ("Singapore", "Singapore", 2),
)  # fmt: skip
