"""A read-only SQL sandbox that runs agent-written queries, and execution-accuracy scoring.

sql-v0 executes every query an LLM agent writes against a real database. :class:`SQLSandbox`
makes that safe: a query can never change the database or reach outside it, and every bad query
(a write, a syntax error, a runaway join, binary garbage) comes back as a :class:`QueryResult`
with ``ok=False`` and an ``"error: ..."`` message for the agent, within about
``time_limit_s`` seconds. :meth:`SQLSandbox.execute` never raises for agent input.

SQLite (the default, and what sql-v0's data sets use) is locked down in layers, each enough on
its own to stop writes:

* the file is opened read-only (``mode=ro`` URI) with ``PRAGMA query_only``, no extension
  loading and no attached databases (``SQLITE_LIMIT_ATTACHED`` is 0);
* one statement per query (:func:`split_statements`), and statements that write or manage the
  database (INSERT, DROP, ATTACH, VACUUM, BEGIN...) are refused by their first word before
  SQLite sees them;
* an authorizer allows reading only: SELECT, reading columns, functions (except a denylist),
  recursive CTEs and a few read-only pragmas; everything else (``WITH ... DELETE``, temp tables,
  ``PRAGMA writable_schema``, ``load_extension``...) is refused while the statement is
  compiled, before it runs.

Every query ends within about ``time_limit_s``: a progress handler interrupts it once the time
is up, while it computes and while its rows are fetched. Rows stop at ``max_rows`` and bytes at
``max_bytes``, so a huge result never materialises. What the progress handler cannot interrupt,
the inside of one function call, is kept short: no string or blob may grow past
``max(max_bytes, 1 MB)``, LIKE/GLOB patterns are at most 500 bytes, ``regexp`` (Python's
``re``) is refused, and ``instr``, ``replace`` and two-argument ``trim``/``ltrim``/``rtrim``,
quadratic in SQLite, are replaced by linear versions with the same results.

Other databases (any SQLAlchemy URL) get a stricter statement check (only ``SELECT``, ``WITH``
or ``VALUES``, and no semicolon but a trailing one, as their quoting rules differ from
SQLite's), the same row, byte and time limits, a read-only transaction where the dialect has one
(PostgreSQL: ``SET TRANSACTION READ ONLY`` and a ``statement_timeout``; MySQL/MariaDB:
``START TRANSACTION READ ONLY`` and ``max_execution_time``) and a ROLLBACK after every query.
Connect those as a database user that may only read: the transaction setting is a second line,
not a permission system.

Scoring follows text-to-SQL execution accuracy: :func:`results_match` compares the predicted and
gold rows as multisets (in order when :func:`gold_is_ordered` says the gold query sorts), with a
numeric tolerance.

Only the standard library and SQLAlchemy are used.
"""

from __future__ import annotations

import datetime
import decimal
import math
import numbers
import os
import re
import sqlite3
import threading
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import sqlalchemy
from sqlalchemy.engine import Connection, CursorResult, Engine, make_url
from sqlalchemy.pool import StaticPool

__all__ = [
    "QueryResult",
    "SQLSandbox",
    "gold_is_ordered",
    "results_match",
    "split_statements",
]

MESSAGE_LIMIT = 300  # characters of a database error message shown to the agent
SCHEMA_VALUE_CHARS = 40  # sample values in schema() are cut to this many characters
TABLE_CELL_CHARS = 100  # cells in QueryResult.to_text() are cut to this many characters
PROGRESS_STEPS = 1000  # SQLite VM steps between two checks of the time limit (~microseconds)
FETCH_BATCH = 100  # rows fetched at a time, so the byte limit stops a result early
MIN_VALUE_BYTES = 1_000_000  # SQLite's per-value length limit is never set below this
# LIKE and GLOB cost (value length x pattern length) inside one call the time limit cannot
# interrupt: a 1 MB value against a 49,000-character pattern takes 36 s. Real patterns are short.
LIKE_PATTERN_BYTES = 500

# Other databases run only statements that start with these words.
_READING_KEYWORDS = frozenset({"SELECT", "WITH", "VALUES"})
# SQLite's statements that do not only read (its whole grammar is SELECT, WITH, VALUES, PRAGMA,
# EXPLAIN and these): refused by name. Any other first word reaches SQLite, whose syntax error
# ('near "SELEC": syntax error') tells the agent more than a refusal would.
_SQLITE_WRITING_KEYWORDS = frozenset(
    {
        "ALTER", "ANALYZE", "ATTACH", "BEGIN", "COMMIT", "CREATE", "DELETE", "DETACH", "DROP",
        "END", "INSERT", "REINDEX", "RELEASE", "REPLACE", "ROLLBACK", "SAVEPOINT", "UPDATE",
        "VACUUM",
    }
)  # fmt: skip

# Pragmas that only read the schema; the value is whether the pragma may take an argument
# (a table or index name). SQLAlchemy reads read_uncommitted when it connects.
_READ_ONLY_PRAGMAS = {
    "table_info": True,
    "table_xinfo": True,
    "index_list": True,
    "index_info": True,
    "index_xinfo": True,
    "foreign_key_list": True,
    "read_uncommitted": False,
}
# Functions that load code, touch files, or run Python code the time limit cannot interrupt
# (SQLAlchemy registers ``regexp`` as Python's re.search: catastrophic backtracking).
_DENIED_FUNCTIONS = frozenset(
    {"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer", "regexp"}
)
# Table-valued functions used once before the authorizer is installed: SQLite registers them
# on first use with bookkeeping writes to its in-memory schema that the authorizer would refuse.
_TABLE_FUNCTIONS_TO_PREPARE = (
    "SELECT 1 FROM json_each('[]')",
    "SELECT 1 FROM json_tree('[]')",
    *(f"SELECT 1 FROM pragma_{name}('sqlite_master')" for name in ("table_info", "table_xinfo")),
    *(f"SELECT 1 FROM pragma_{name}('x')" for name in ("index_list", "index_info", "index_xinfo")),
    "SELECT 1 FROM pragma_foreign_key_list('sqlite_master')",
)
_SCHEMA_TABLES = frozenset({"sqlite_master", "sqlite_temp_master", "sqlite_schema"})
# How other servers say a query hit the time limit, or tried to write (lowercase).
_TIMEOUT_PHRASES = (
    "canceling statement due to statement timeout",  # PostgreSQL
    "maximum statement execution time exceeded",  # MySQL
    "max_statement_time exceeded",  # MariaDB
)
_READ_ONLY_PHRASES = ("in a read-only transaction", "in a read only transaction")

# Control characters other than the whitespace SQLite accepts, C1 controls, lone surrogates
# (undecodable bytes) and U+FFFD (bytes a decoder replaced): signs of binary data, not SQL.
_BINARY = re.compile("[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffd]")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
_SKELETON_TOKEN = re.compile(r"[()]|[A-Za-z_][A-Za-z0-9_$]*")


# --- Results ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QueryResult:
    """The outcome of one query.

    Attributes:
        ok (bool): whether the query ran and its whole (or row-truncated) result was read.
        columns (tuple[str, ...]): column names, in order (empty when not ``ok``).
        rows (tuple[tuple, ...]): the rows, as plain Python values (int, float, str, bytes,
            None); at most ``max_rows`` of them.
        error (str | None): ``"error: ..."`` message for the agent when not ``ok``, else None.
        truncated (bool): the query returned more than ``max_rows`` rows and was cut there.
        elapsed_s (float): wall-clock seconds the sandbox spent on the query.
    """

    ok: bool
    columns: tuple[str, ...]
    rows: tuple[tuple, ...]
    error: str | None
    truncated: bool
    elapsed_s: float

    def to_text(self, max_rows: int = 20, max_chars: int = 4000) -> str:
        """Return the result as compact text for the agent's observation.

        A table ``"col1 | col2"`` then one ``"v | v"`` line per row (NULL for None, long cells
        cut), and a footer: ``"(N rows)"``, ``"(showing 20 of N rows)"`` and/or
        ``"(truncated at 1000 rows)"``. Text over ``max_chars`` loses its last rows (whole
        lines, replaced by ``"..."``), never the footer. A failed query gives its error message.

        Args:
            max_rows (int): rows shown at most.
            max_chars (int): the text is cut to this many characters.

        Returns:
            str: the table, or the error message.
        """
        if not self.ok:
            return _cut_text(self.error or "error: the query failed", max_chars)
        shown = self.rows[: max(max_rows, 0)]
        lines = []
        if self.columns:
            lines.append(" | ".join(_cell(name, TABLE_CELL_CHARS) for name in self.columns))
        lines.extend(" | ".join(_cell(value, TABLE_CELL_CHARS) for value in row) for row in shown)
        total = len(self.rows)
        notes = []
        if len(shown) < total:
            notes.append(f"showing {len(shown)} of {total} rows")
        if self.truncated:
            notes.append(f"truncated at {total} rows")
        if not notes:
            notes.append("1 row" if total == 1 else f"{total} rows")
        text = "\n".join([*lines, f"({'; '.join(notes)})"])
        if len(text) <= max_chars:
            return text
        footer = f"({'; '.join([*notes, f'text cut at {max_chars} characters'])})"
        room = max_chars - len(footer) - len("\n...\n")
        if room <= 0:
            return _cut_text(footer, max_chars)
        body = "\n".join(lines)[:room]
        if "\n" in body:
            body = body[: body.rindex("\n")]  # whole lines only
        return f"{body}\n...\n{footer}"


def _failure(message: str, started: float) -> QueryResult:
    return QueryResult(False, (), (), message, False, time.perf_counter() - started)


def _cut_text(text: str, max_chars: int) -> str:
    """Return ``text`` cut to ``max_chars`` characters, saying so at the end when cut."""
    if len(text) <= max_chars:
        return text
    note = f"\n... (cut at {max_chars} characters)"
    if max_chars <= len(note):
        return text[:max_chars]
    return text[: max_chars - len(note)] + note


def _cell(value: Any, limit: int) -> str:
    """Format one value on one line: NULL, X'hex' for blobs, long text cut with "..."."""
    if value is None:
        text = "NULL"
    elif isinstance(value, bytes):
        text = f"X'{value[:limit].hex().upper()}'"
    elif isinstance(value, float):
        text = repr(value)
    else:
        text = str(value).replace("\r\n", "\\n").replace("\n", "\\n").replace("\r", "\\r")
    return text if len(text) <= limit else text[: max(limit - 3, 0)] + "..."


def _plain(value: Any) -> Any:
    """Return a database value as int, float, str, bytes, bool or None."""
    if value is None or isinstance(value, int | float | str | bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    return str(value)


def _value_bytes(value: Any) -> int:
    """Count a value toward max_bytes: its length for text and blobs, 8 for a number."""
    if isinstance(value, str | bytes):
        return len(value)
    return 0 if value is None else 8


class _ResultTooLarge(Exception):
    """The fetched values passed max_bytes."""


class _TimeLimit(Exception):
    """The wall-clock deadline passed between two fetches."""


# --- The sandbox --------------------------------------------------------------------------------


class _Guard:
    """The per-query state SQLite's authorizer and progress handler consult."""

    def __init__(self) -> None:
        self.deadline: float | None = None  # time.monotonic() at which the query is stopped
        self.timed_out = False
        self.refused: list[str] = []  # what the authorizer refused, in order

    def start(self, time_limit_s: float) -> None:
        """Arm the time limit and forget the previous query's refusals."""
        self.timed_out = False
        self.refused = []
        self.deadline = time.monotonic() + time_limit_s

    def stop(self) -> None:
        """Disarm the time limit."""
        self.deadline = None

    def expired(self) -> bool:
        """Tell whether the armed time limit has passed."""
        return self.deadline is not None and time.monotonic() >= self.deadline

    def progress(self) -> int:
        """SQLite progress handler: non-zero interrupts the running statement."""
        if self.expired():
            self.timed_out = True
            return 1
        return 0

    def authorize(
        self, action: int, arg1: str | None, arg2: str | None, database: str | None, source: Any
    ) -> int:
        """SQLite authorizer: allow reading, deny (and remember) everything else."""
        if action in (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE):
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_FUNCTION:
            if (arg2 or "").lower() not in _DENIED_FUNCTIONS:
                return sqlite3.SQLITE_OK
        elif action == sqlite3.SQLITE_PRAGMA:
            takes_argument = _READ_ONLY_PRAGMAS.get((arg1 or "").lower())
            if takes_argument is not None and (takes_argument or arg2 is None):
                return sqlite3.SQLITE_OK
        self.refused.append(_describe_action(action, arg1, arg2))
        return sqlite3.SQLITE_DENY


def _action_labels() -> dict[int, str]:
    names = {
        "CREATE_INDEX": "CREATE INDEX",
        "CREATE_TABLE": "CREATE TABLE",
        "CREATE_TEMP_INDEX": "CREATE TEMP INDEX",
        "CREATE_TEMP_TABLE": "CREATE TEMP TABLE",
        "CREATE_TEMP_TRIGGER": "CREATE TEMP TRIGGER",
        "CREATE_TEMP_VIEW": "CREATE TEMP VIEW",
        "CREATE_TRIGGER": "CREATE TRIGGER",
        "CREATE_VIEW": "CREATE VIEW",
        "CREATE_VTABLE": "CREATE VIRTUAL TABLE",
        "DELETE": "DELETE FROM",
        "DROP_INDEX": "DROP INDEX",
        "DROP_TABLE": "DROP TABLE",
        "DROP_TEMP_INDEX": "DROP TEMP INDEX",
        "DROP_TEMP_TABLE": "DROP TEMP TABLE",
        "DROP_TEMP_TRIGGER": "DROP TEMP TRIGGER",
        "DROP_TEMP_VIEW": "DROP TEMP VIEW",
        "DROP_TRIGGER": "DROP TRIGGER",
        "DROP_VIEW": "DROP VIEW",
        "DROP_VTABLE": "DROP VIRTUAL TABLE",
        "INSERT": "INSERT INTO",
        "UPDATE": "UPDATE",
        "ALTER_TABLE": "ALTER TABLE",
        "REINDEX": "REINDEX",
        "ANALYZE": "ANALYZE",
        "ATTACH": "ATTACH",
        "DETACH": "DETACH",
        "SAVEPOINT": "SAVEPOINT",
    }
    return {
        getattr(sqlite3, f"SQLITE_{name}"): label
        for name, label in names.items()
        if hasattr(sqlite3, f"SQLITE_{name}")
    }


_ACTION_LABELS = _action_labels()
# Actions whose first argument is the table they act on, worth naming in the message.
_TABLE_ACTIONS = frozenset(
    {"CREATE TABLE", "CREATE TEMP TABLE", "DELETE FROM", "DROP TABLE", "INSERT INTO", "UPDATE"}
)


def _describe_action(action: int, arg1: str | None, arg2: str | None) -> str:
    """Name a refused authorizer action for the agent, e.g. ``"DROP TABLE artists"``."""
    if action == sqlite3.SQLITE_FUNCTION:
        return f"function {arg2}()"
    if action == sqlite3.SQLITE_PRAGMA:
        return f"PRAGMA {arg1}"
    if action == sqlite3.SQLITE_TRANSACTION:
        return arg1 or "TRANSACTION"
    label = _ACTION_LABELS.get(action, f"action {action}")
    return f"{label} {arg1}" if label in _TABLE_ACTIONS and arg1 else label


def _decode_text(raw: bytes) -> str:
    """Decode a TEXT value; databases with a few bytes of bad UTF-8 stay readable."""
    return raw.decode("utf-8", errors="replace")


# --- Linear-time replacements for SQLite's quadratic string functions ---------------------------
#
# SQLite's instr() and replace() compare the needle at every position of the haystack, and
# trim(X, Y) compares every trimmed character with every character of Y: with two long
# arguments one call runs for seconds to minutes, and the progress handler cannot stop a call
# in progress. These versions (str.find, str.replace, a set of characters) are linear, and
# give SQLite's results, NULLs and number-to-text conversions included.

_TEXT_CONVERTER_LOCK = threading.Lock()
_text_converter: sqlite3.Connection | None = None


def _sqlite_text(value: int | float | str | bytes) -> str:
    """Return ``value`` as SQLite converts it to TEXT (floats as SQLite prints them)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return _decode_text(value)
    if isinstance(value, int):
        return str(value)
    with _TEXT_CONVERTER_LOCK:
        return _converter().execute("SELECT CAST(? AS TEXT)", (value,)).fetchone()[0]


def _converter() -> sqlite3.Connection:
    """Return the process's side connection that runs SQLite's own conversions (call it
    holding ``_TEXT_CONVERTER_LOCK``)."""
    global _text_converter
    if _text_converter is None:
        _text_converter = sqlite3.connect(":memory:", check_same_thread=False)
    return _text_converter


def _instr(haystack: Any, needle: Any) -> int | None:
    if haystack is None or needle is None:
        return None
    if isinstance(haystack, bytes) and isinstance(needle, bytes):
        return haystack.find(needle) + 1  # two blobs: a byte position
    return _sqlite_text(haystack).find(_sqlite_text(needle)) + 1


def _replace(text: Any, old: Any, new: Any) -> Any:
    if text is None or old is None or new is None:
        return None
    old_text = _sqlite_text(old)
    if not old_text:
        return _sqlite_text(text) if isinstance(text, bytes) else text  # X itself, as SQLite
    return _sqlite_text(text).replace(old_text, _sqlite_text(new))


def _trimmer(left: bool, right: bool) -> Any:
    def trim(text: Any, characters: Any) -> str | None:
        if text is None or characters is None:
            return None
        value, strip = _sqlite_text(text), set(_sqlite_text(characters))
        start, end = 0, len(value)
        while left and start < end and value[start] in strip:
            start += 1
        while right and end > start and value[end - 1] in strip:
            end -= 1
        return value[start:end]

    return trim


# printf's width and precision: a flag run, then digits or "*" (taken from the arguments)
_PRINTF_SPEC = re.compile(r"%[-+ 0#,!]*(\*|\d+)?(?:\.(\*|\d+))?(?:ll|l)?(.)", re.S)


def _bounded_printf(limit: int) -> Any:
    """Return printf(FORMAT, ...) as SQLite's, but NULL at once when a width or precision asks
    for more than ``limit`` characters (SQLite builds ``printf('%.1000000000c', 'x')`` a
    character at a time, for seconds, and only then finds it too big: NULL too)."""

    def printf(*arguments: Any) -> Any:
        if not arguments or arguments[0] is None:
            return None
        spec, taken, least = _sqlite_text(arguments[0]), 1, 0
        for match in _PRINTF_SPEC.finditer(spec):
            if match.group(3) == "%":
                continue
            sizes = []
            for size in match.group(1), match.group(2):
                if size == "*":
                    value = arguments[taken] if taken < len(arguments) else 0
                    taken += 1
                    size = abs(int(value)) if isinstance(value, int | float) else 0
                sizes.append(int(size or 0))
            width, precision = sizes
            # the result holds at least every width, and every precision that pads or
            # repeats (a string's precision only cuts it)
            least += width + (0 if match.group(3) in "szqQw" else precision)
            if least > limit:
                return None
            taken += 1
        placeholders = ", ".join("?" * len(arguments))
        with _TEXT_CONVERTER_LOCK:
            converter = _converter()
            converter.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, limit)
            try:
                query = f"SELECT printf({placeholders})"
                return converter.execute(query, arguments).fetchone()[0]
            finally:
                converter.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 1_000_000_000)

    return printf


def _install_linear_functions(connection: sqlite3.Connection, value_limit: int) -> None:
    """Override instr(X,Y), replace(X,Y,Z), the two-argument trims and printf/format on
    ``connection``."""
    printf = _bounded_printf(value_limit)
    for name, arguments, function in (
        ("instr", 2, _instr),
        ("replace", 3, _replace),
        ("trim", 2, _trimmer(True, True)),
        ("ltrim", 2, _trimmer(True, False)),
        ("rtrim", 2, _trimmer(False, True)),
        ("printf", -1, printf),
        ("format", -1, printf),
    ):
        connection.create_function(name, arguments, function, deterministic=True)


class SQLSandbox:
    """Run agent-written SQL read-only against one database, with time, row and size limits.

    Args:
        database (str | os.PathLike): a path to a SQLite file, or any SQLAlchemy URL
            (``"sqlite:///data/chinook.db"``, ``"postgresql://reader@host/db"``).
        time_limit_s (float): wall-clock budget of one query, including fetching its rows.
        max_rows (int): rows kept per result; more set ``truncated``.
        max_bytes (int): text/blob bytes (8 per number) a result may hold; more is an error.
        max_sql_chars (int): longest query accepted, in characters.

    Raises:
        FileNotFoundError: the SQLite file does not exist.
        ValueError: a limit is not positive, or the file is not a SQLite database.
    """

    def __init__(
        self,
        database: str | os.PathLike,
        *,
        time_limit_s: float = 1.0,
        max_rows: int = 1000,
        max_bytes: int = 1_000_000,
        max_sql_chars: int = 20_000,
    ):
        for name, limit in (
            ("time_limit_s", time_limit_s),
            ("max_rows", max_rows),
            ("max_bytes", max_bytes),
            ("max_sql_chars", max_sql_chars),
        ):
            if not limit > 0:
                raise ValueError(f"{name} must be positive, got {limit!r}")
        self.time_limit_s = float(time_limit_s)
        self.max_rows = int(max_rows)
        self.max_bytes = int(max_bytes)
        self.max_sql_chars = int(max_sql_chars)
        self._guard = _Guard()
        self._lock = threading.Lock()  # one query at a time: the guard is per sandbox
        self._closed = False
        self._sqlite_path: Path | None = None

        text = os.fspath(database)
        if isinstance(text, bytes):
            text = os.fsdecode(text)
        if "://" in text:
            url = make_url(text)
            if url.get_backend_name() == "sqlite":
                if not url.database or url.database == ":memory:":
                    raise ValueError(
                        f"{text!r} is an in-memory SQLite database; the sandbox needs a file"
                    )
                self._sqlite_path = Path(url.database)
            else:
                self._engine: Engine = sqlalchemy.create_engine(url, pool_pre_ping=True)
        else:
            self._sqlite_path = Path(text)

        if self._sqlite_path is not None:
            self._sqlite_path = self._sqlite_path.expanduser().resolve()
            if not self._sqlite_path.is_file():
                raise FileNotFoundError(f"no SQLite database file at {self._sqlite_path}")
            # StaticPool: one connection for the sandbox's life, locked down when it is opened.
            self._engine = sqlalchemy.create_engine(
                "sqlite://", creator=self._open_sqlite, poolclass=StaticPool
            )
            try:
                self._read_schema_rows("SELECT count(*) FROM sqlite_master")
            except Exception as error:
                self._engine.dispose()
                reason = str(error).removeprefix("error: ")
                raise ValueError(
                    f"{self._sqlite_path} is not a readable SQLite database: {reason}"
                ) from None

    # --- public API ----------------------------------------------------------------------------

    @property
    def dialect(self) -> str:
        """Return the database's SQLAlchemy dialect name: ``"sqlite"``, ``"postgresql"``..."""
        return self._engine.dialect.name

    def execute(self, sql: str) -> QueryResult:
        """Run one read-only query; never raises for agent input of any kind.

        Args:
            sql (str): one SQL statement (a trailing semicolon is fine).

        Returns:
            QueryResult: the columns and rows when ``ok``; otherwise an ``"error: ..."`` message
            saying what to fix (refused write, time limit, too large, syntax error...).
        """
        started = time.perf_counter()
        try:
            statement, problem = self._check(sql)
            if problem is not None:
                return _failure(problem, started)
            return self._run(statement, self.max_rows, started)
        except Exception as error:  # a bug of ours must still not crash the env
            return _failure(f"error: the query failed ({type(error).__name__})", started)

    def schema(self, sample_rows: int = 3) -> str:
        """Return the CREATE TABLE statement of every table, each with a few example rows.

        The rows follow each statement as an SQL comment (``/* 3 example rows:\\nid | name\\n1 |
        AC/DC\\n... */``), read under the sandbox's limits, values cut to about 40 characters.

        Args:
            sample_rows (int): example rows per table; 0 shows none.

        Returns:
            str: the statements, separated by blank lines.
        """
        parts = []
        for name, create in self._create_statements():
            part = create.strip().rstrip(";") + ";"
            if sample_rows > 0:
                part += "\n" + self._example_rows(name, sample_rows)
            parts.append(part)
        return "\n\n".join(parts)

    def table_names(self) -> list[str]:
        """Return the names of the database's tables, in creation order for SQLite.

        Returns:
            list[str]: table names (SQLite's internal ``sqlite_*`` tables excluded).
        """
        if self._sqlite_path is not None:
            return [name for name, _ in self._create_statements()]
        return list(sqlalchemy.inspect(self._engine).get_table_names())

    def close(self) -> None:
        """Close the database connection; later queries return an error."""
        with self._lock:
            self._closed = True
            self._engine.dispose()

    def __enter__(self) -> SQLSandbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = self._sqlite_path or self._engine.url.render_as_string(hide_password=True)
        return f"SQLSandbox({str(where)!r}, time_limit_s={self.time_limit_s})"

    # --- checks before anything runs -----------------------------------------------------------

    def _check(self, sql: Any) -> tuple[str, str | None]:
        """Return ``(the one statement to run, None)``, or ``("", "error: ...")``."""
        if not isinstance(sql, str):
            return "", f"error: the query must be text (a str), got {type(sql).__name__}"
        if len(sql) > self.max_sql_chars:
            return "", (
                f"error: the query is too long ({len(sql):,} characters; the limit is "
                f"{self.max_sql_chars:,})"
            )
        if _BINARY.search(sql):
            return "", "error: the query contains binary data"
        statements = split_statements(sql)
        if not statements:
            return "", "error: the query is empty; write one SELECT statement"
        if len(statements) > 1 or (self.dialect != "sqlite" and _inner_semicolon(sql)):
            return "", "error: only one statement per query is allowed"
        words = _WORD.findall(_skeleton(statements[0]))
        first = words[0].upper() if words else ""
        if self.dialect == "sqlite":
            refused = first in _SQLITE_WRITING_KEYWORDS
        else:
            refused = first not in _READING_KEYWORDS
        if refused:
            return "", _refusal(_leading_action(words) if words else None)
        return statements[0], None

    # --- running -------------------------------------------------------------------------------

    def _run(self, statement: str, max_rows: int, started: float) -> QueryResult:
        """Run a checked statement under the limits; return its result or the error."""
        with self._lock:
            if self._closed:
                return _failure("error: the SQL sandbox is closed", started)
            self._guard.start(self.time_limit_s)
            try:
                with self._engine.connect() as connection:
                    try:
                        columns, rows, truncated = self._run_read_only(
                            connection, statement, max_rows
                        )
                    finally:
                        self._guard.stop()
                        connection.rollback()  # nothing lingers, whatever happened
            except Exception as error:
                return _failure(self._message_for(error), started)
            finally:
                self._guard.stop()  # also when no connection could be opened
        elapsed = time.perf_counter() - started
        return QueryResult(True, columns, rows, None, truncated, elapsed)

    def _run_read_only(
        self, connection: Connection, statement: str, max_rows: int
    ) -> tuple[tuple[str, ...], tuple[tuple, ...], bool]:
        """Execute ``statement`` in a read-only setting and fetch within the limits."""
        options: dict[str, Any] = {"no_parameters": True}  # a ':' or '%' in agent SQL is text
        if self.dialect == "sqlite":
            options["sqlite_raw_colnames"] = True
        else:
            options["stream_results"] = True  # a server-side cursor: rows come as fetched
            self._begin_read_only(connection)
        result = connection.exec_driver_sql(statement, execution_options=options)
        return self._fetch(result, max_rows)

    def _begin_read_only(self, connection: Connection) -> None:
        """Open a read-only transaction with a server-side timeout, where the dialect has them."""
        milliseconds = max(1, int(self.time_limit_s * 1000))
        if self.dialect == "postgresql":
            connection.exec_driver_sql("SET TRANSACTION READ ONLY")
            connection.exec_driver_sql(f"SET LOCAL statement_timeout = {milliseconds}")
        elif self.dialect in ("mysql", "mariadb"):
            for setting in (
                f"SET SESSION max_execution_time = {milliseconds}",  # MySQL
                f"SET SESSION max_statement_time = {milliseconds / 1000}",  # MariaDB
            ):
                try:
                    connection.exec_driver_sql(setting)
                except sqlalchemy.exc.DBAPIError:
                    connection.rollback()  # the other server's variable: ignore
            connection.exec_driver_sql("START TRANSACTION READ ONLY")

    def _fetch(
        self, result: CursorResult, max_rows: int
    ) -> tuple[tuple[str, ...], tuple[tuple, ...], bool]:
        """Fetch at most ``max_rows + 1`` rows and ``max_bytes`` bytes of values."""
        if not result.returns_rows:
            return (), (), False
        columns = tuple(str(name) for name in result.keys())
        rows: list[tuple] = []
        size = 0
        truncated = False
        try:
            while not truncated:
                batch = result.fetchmany(min(FETCH_BATCH, max_rows + 1 - len(rows)))
                if not batch:
                    break
                for raw_row in batch:
                    if len(rows) == max_rows:  # the row past the limit only says there are more
                        truncated = True
                        break
                    row = tuple(_plain(value) for value in raw_row)
                    size += sum(_value_bytes(value) for value in row)
                    if size > self.max_bytes:
                        raise _ResultTooLarge
                    rows.append(row)
                if self._guard.expired():  # other dialects' drivers have no progress handler
                    raise _TimeLimit
        finally:
            result.close()  # resets the statement: no read lock outlives the query
        return columns, tuple(rows), truncated

    def _message_for(self, error: BaseException) -> str:
        """Turn an exception from running a query into a short message for the agent."""
        if isinstance(error, _ResultTooLarge):
            return (
                f"error: the result is too large (over {self.max_bytes:,} bytes); select fewer "
                "columns or add LIMIT"
            )
        original = getattr(error, "orig", None) or error
        text = " ".join(str(original).split()) or type(original).__name__
        if isinstance(original, sqlite3.Error):
            # SQLite's messages are fixed strings: compare whole messages, so that a table named
            # "interrupted" is not mistaken for a timeout.
            timed_out = text == "interrupted"
            refused = text in ("not authorized", "attempt to write a readonly database")
        else:
            lowered = text.lower()
            timed_out = any(phrase in lowered for phrase in _TIMEOUT_PHRASES)
            refused = any(phrase in lowered for phrase in _READ_ONLY_PHRASES)
        if isinstance(error, _TimeLimit) or self._guard.timed_out or timed_out:
            return f"error: the query ran past the {self.time_limit_s} s time limit"
        if self._guard.refused or refused:
            return _refusal(_most_telling(self._guard.refused))
        if text == "string or blob too big":
            return (
                f"error: a value in the query grew past {self._value_limit():,} bytes (string "
                "or blob too big)"
            )
        if text.startswith("You can only execute one statement at a time"):
            return "error: only one statement per query is allowed"
        if isinstance(error, MemoryError) or text == "out of memory":
            return "error: the query needs too much memory"
        return _cut_text(f"error: {text}", MESSAGE_LIMIT)

    # --- SQLite connection ---------------------------------------------------------------------

    def _value_limit(self) -> int:
        """Longest string or blob SQLite may build: a longer value could never be returned."""
        return max(self.max_bytes, MIN_VALUE_BYTES)

    def _open_sqlite(self) -> sqlite3.Connection:
        """Open the SQLite file read-only, with the authorizer and time limit installed."""
        assert self._sqlite_path is not None
        connection = sqlite3.connect(
            f"file:{quote(str(self._sqlite_path))}?mode=ro",
            uri=True,
            check_same_thread=False,
            isolation_level=None,  # no implicit BEGIN: the driver never opens a transaction
        )
        try:
            connection.execute("PRAGMA query_only = ON")
            connection.execute("PRAGMA trusted_schema = OFF")
            if hasattr(connection, "enable_load_extension"):
                connection.enable_load_extension(False)
            if hasattr(connection, "setlimit"):  # Python 3.11+
                connection.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
                connection.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, self._value_limit())
                connection.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, 4 * self.max_sql_chars + 64)
                connection.setlimit(sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH, LIKE_PATTERN_BYTES)
            connection.text_factory = _decode_text
            _install_linear_functions(connection, self._value_limit())
            for query in _TABLE_FUNCTIONS_TO_PREPARE:
                try:
                    connection.execute(query).fetchall()
                except sqlite3.Error:
                    pass  # a build without the JSON1 functions, say
            connection.set_authorizer(self._guard.authorize)
            connection.set_progress_handler(self._guard.progress, PROGRESS_STEPS)
        except BaseException:
            connection.close()
            raise
        return connection

    # --- schema --------------------------------------------------------------------------------

    def _read_schema_rows(self, sql: str) -> list[tuple]:
        """Run one of our own queries (not agent SQL) under the limits; raise if it fails."""
        result = self._run(sql, 1_000_000, time.perf_counter())
        if not result.ok:
            raise RuntimeError(result.error)
        return list(result.rows)

    def _create_statements(self) -> list[tuple[str, str]]:
        """Return (table name, CREATE TABLE statement) for every table."""
        if self._sqlite_path is not None:
            rows = self._read_schema_rows(
                "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND sql IS NOT NULL "
                "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY rowid"
            )
            return [(str(name), str(sql)) for name, sql in rows]
        metadata = sqlalchemy.MetaData()
        metadata.reflect(bind=self._engine)
        dialect = self._engine.dialect
        return [
            (table.name, str(sqlalchemy.schema.CreateTable(table).compile(dialect=dialect)))
            for table in metadata.sorted_tables
        ]

    def _example_rows(self, table: str, count: int) -> str:
        """Return up to ``count`` rows of ``table`` as an SQL comment."""
        query = (
            sqlalchemy.select(sqlalchemy.literal_column("*"))
            .select_from(sqlalchemy.table(table))
            .limit(count)
        )
        sql = str(
            query.compile(dialect=self._engine.dialect, compile_kwargs={"literal_binds": True})
        )
        result = self._run(sql, count, time.perf_counter())
        if not result.ok:
            return f"/* example rows unavailable: {_comment_safe(result.error or '')} */"
        if not result.rows:
            return "/* 0 example rows (the table is empty) */"
        noun = "example row" if len(result.rows) == 1 else "example rows"
        lines = [f"/* {len(result.rows)} {noun}:", " | ".join(result.columns)]
        lines.extend(
            " | ".join(_cell(value, SCHEMA_VALUE_CHARS) for value in row) for row in result.rows
        )
        return _comment_safe("\n".join(lines)) + " */"


def _comment_safe(text: str) -> str:
    """Keep a value from closing the SQL comment it is shown in."""
    return text.replace("*/", "* /")


def _refusal(what: str | None) -> str:
    message = "error: the query was refused: only reading (SELECT) is allowed"
    return f"{message} ({what})" if what else message


def _most_telling(refused: list[str]) -> str | None:
    """Pick the refused action to name: the first not on SQLite's own schema tables."""
    for action in refused:
        if action.split()[-1] not in _SCHEMA_TABLES:
            return action
    return "a change to the schema" if refused else None


_OBJECT_MODIFIERS = frozenset({"TEMP", "TEMPORARY", "UNIQUE", "VIRTUAL", "OR", "REPLACE"})


def _leading_action(words: list[str]) -> str:
    """Name the kind of a refused statement from its first words: ``"CREATE TEMP TABLE"``."""
    upper = [word.upper() for word in words[:6]]
    if upper[0] in ("CREATE", "DROP", "ALTER"):
        named = [upper[0]]
        for word in upper[1:]:
            named.append(word)
            if word not in _OBJECT_MODIFIERS:
                break
        return " ".join(named)
    if upper[0] in ("ATTACH", "DETACH") and upper[1:2] == ["DATABASE"]:
        return f"{upper[0]} DATABASE"
    return upper[0]


def _inner_semicolon(sql: str) -> bool:
    """Tell whether ``sql`` has a semicolon anywhere but at its end.

    Other dialects quote differently from SQLite (backslash escapes, ``$$`` strings, nested
    comments); refusing every inner semicolon keeps a second statement from hiding in a string
    that only our splitter thinks is one.
    """
    return ";" in sql.rstrip().rstrip(";")


# --- Lexing: statements, comments and quotes ------------------------------------------------------


def _is_id_char(char: str) -> bool:
    return char.isalnum() or char in "_$" or ord(char) >= 0x80


def _segments(sql: str) -> Iterator[tuple[str, int, int]]:
    """Split ``sql`` as SQLite's tokenizer does into (kind, start, end) pieces.

    Kinds: ``"code"``, ``";"``, and the opaque ``"quoted"`` (string literals, quoted
    identifiers, ``[..]``, parameters like ``$name(..)``) and ``"comment"``. An unterminated
    quote or comment runs to the end.
    """
    length = len(sql)
    index = 0
    code_start = 0

    def closing(quote_char: str, start: int) -> int:
        """End of a quoted piece starting at ``start``; a doubled quote is an escape."""
        position = start + 1
        while True:
            found = sql.find(quote_char, position)
            if found == -1:
                return length
            if quote_char != "]" and sql.startswith(quote_char, found + 1):
                position = found + 2
                continue
            return found + 1

    while index < length:
        char = sql[index]
        end = None
        kind = ""
        if char in "'\"`[":
            kind, end = "quoted", closing("]" if char == "[" else char, index)
        elif char == "-" and sql.startswith("-", index + 1):
            newline = sql.find("\n", index)
            kind, end = "comment", length if newline == -1 else newline + 1
        elif char == "/" and sql.startswith("*", index + 1):
            close = sql.find("*/", index + 2)
            kind, end = "comment", length if close == -1 else close + 2
        elif char == ";":
            kind, end = ";", index + 1
        elif char in "$@:#":
            # A parameter such as $name or $name(any text) is one token to SQLite.
            position, name_chars = index + 1, 0
            while position < length:
                current = sql[position]
                if _is_id_char(current):
                    name_chars += 1
                    position += 1
                elif current == "(" and name_chars:
                    position += 1
                    while position < length and not sql[position].isspace():
                        position += 1
                        if sql[position - 1] == ")":
                            break
                    break
                elif current == ":" and sql.startswith(":", position + 1):
                    position += 2
                else:
                    break
            if position > index + 1:
                kind, end = "quoted", position
        if end is None:
            index += 1
            continue
        if code_start < index:
            yield "code", code_start, index
        yield kind, index, end
        index = code_start = end
    if code_start < length:
        yield "code", code_start, length


def split_statements(sql: str) -> list[str]:
    """Return the statements of ``sql``, split on semicolons outside quotes and comments.

    Semicolons inside string literals (``'..'``), quoted identifiers (``".."``, ``[..]``,
    ```..```), ``--`` and ``/* */`` comments do not split. Statements that hold nothing but
    whitespace and comments are dropped, so ``"SELECT 1;"`` and ``"SELECT 1; -- done"`` are one
    statement.

    Args:
        sql (str): SQL text.

    Returns:
        list[str]: each statement's text, stripped, without its semicolon.
    """
    statements = []
    start = 0
    has_content = False
    for kind, begin, end in _segments(sql):
        if kind == ";":
            if has_content:
                statements.append(sql[start:begin].strip())
            start, has_content = end, False
        elif kind == "quoted" or (kind == "code" and sql[begin:end].strip()):
            has_content = True
    if has_content:
        statements.append(sql[start:].strip())
    return statements


def _skeleton(sql: str) -> str:
    """Return ``sql``'s code with every quoted piece and comment replaced by a space."""
    return "".join(
        sql[begin:end] if kind in ("code", ";") else " " for kind, begin, end in _segments(sql)
    )


def gold_is_ordered(sql: str) -> bool:
    """Tell whether a query's outermost SELECT sorts its rows (has its own ORDER BY).

    ORDER BY inside parentheses (subqueries, CTE bodies, window definitions), string literals,
    quoted identifiers and comments does not count.

    Args:
        sql (str): the (gold) query.

    Returns:
        bool: True when the result's row order is defined, so it must be compared in order.
    """
    depth = 0
    previous_top_level = ""
    for token in _SKELETON_TOKEN.findall(_skeleton(sql)):
        if token == "(":
            depth += 1
        elif token == ")":
            depth = max(depth - 1, 0)
        elif depth == 0:
            word = token.upper()
            if word == "BY" and previous_top_level == "ORDER":
                return True
            previous_top_level = word
    return False


# --- Execution accuracy -------------------------------------------------------------------------


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _values_match(left: Any, right: Any, rel_tol: float, abs_tol: float) -> bool:
    """Tell whether two result values are equal (numbers: within tolerance; bool only bool)."""
    if _is_number(left) and _is_number(right):
        if isinstance(left, int) and isinstance(right, int):
            return left == right  # exact: large ids and counts must not match their neighbours
        try:
            left_float, right_float = float(left), float(right)
        except (OverflowError, ValueError):
            return left == right
        if math.isnan(left_float) or math.isnan(right_float):
            return math.isnan(left_float) and math.isnan(right_float)
        return math.isclose(left_float, right_float, rel_tol=rel_tol, abs_tol=abs_tol)
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if _is_number(left) or _is_number(right):
        return False
    return left == right


def _rows_match(left: tuple, right: tuple, rel_tol: float, abs_tol: float) -> bool:
    return len(left) == len(right) and all(
        _values_match(a, b, rel_tol, abs_tol) for a, b in zip(left, right, strict=True)
    )


_NUMBER = object()  # stands for any number in a row's bucket key


def _bucket_key(row: tuple) -> tuple:
    """Key that equal rows share: the non-numeric values, with numbers as one placeholder."""
    key = []
    for value in row:
        if _is_number(value):
            key.append(_NUMBER)
        elif isinstance(value, bool):
            key.append(("bool", value))  # True must not share a key with 1
        else:
            try:
                hash(value)
                key.append((type(value).__name__, value))
            except TypeError:
                key.append((type(value).__name__, repr(value)))
    return (len(row), *key)


def _numbers_of(row: tuple) -> tuple:
    return tuple(float(value) for value in row if _is_number(value))


def _bucket_matches(left: list[tuple], right: list[tuple], rel_tol: float, abs_tol: float) -> bool:
    """Tell whether two equally long lists of rows match as multisets (numbers with tolerance)."""
    try:
        left_sorted = sorted(left, key=_numbers_of)
        right_sorted = sorted(right, key=_numbers_of)
    except (OverflowError, TypeError):
        left_sorted, right_sorted = left, right
    if all(
        _rows_match(a, b, rel_tol, abs_tol) for a, b in zip(left_sorted, right_sorted, strict=True)
    ):
        return True
    # Sorting can misalign rows whose numbers are within tolerance but ordered differently:
    # fall back to pairing each row with any unused match.
    unused = list(right)
    for row in left:
        for position, candidate in enumerate(unused):
            if _rows_match(row, candidate, rel_tol, abs_tol):
                del unused[position]
                break
        else:
            return False
    return True


def results_match(
    predicted: Sequence[Sequence],
    gold: Sequence[Sequence],
    *,
    ordered: bool = False,
    rel_tol: float = 1e-6,
    abs_tol: float = 1e-9,
) -> bool:
    """Tell whether a predicted query result equals the gold one (execution accuracy).

    Rows are compared as a multiset (duplicates count), or in order when ``ordered``. Column
    order inside a row matters; column names are not compared. Two values match when equal, or
    when both are numbers (int or float, never bool) within ``rel_tol``/``abs_tol`` (two ints
    must be equal). A bool matches only a bool.

    Args:
        predicted (Sequence[Sequence]): the agent's rows.
        gold (Sequence[Sequence]): the gold query's rows.
        ordered (bool): compare row order too (see :func:`gold_is_ordered`).
        rel_tol (float): relative tolerance for numbers.
        abs_tol (float): absolute tolerance for numbers.

    Returns:
        bool: True when the results match; different row counts never do.
    """
    predicted_rows = [tuple(row) for row in predicted]
    gold_rows = [tuple(row) for row in gold]
    if len(predicted_rows) != len(gold_rows):
        return False
    if ordered:
        return all(
            _rows_match(a, b, rel_tol, abs_tol)
            for a, b in zip(predicted_rows, gold_rows, strict=True)
        )
    buckets: dict[tuple, tuple[list[tuple], list[tuple]]] = defaultdict(lambda: ([], []))
    for row in predicted_rows:
        buckets[_bucket_key(row)][0].append(row)
    for row in gold_rows:
        buckets[_bucket_key(row)][1].append(row)
    return all(
        len(left) == len(right) and _bucket_matches(left, right, rel_tol, abs_tol)
        for left, right in buckets.values()
    )
