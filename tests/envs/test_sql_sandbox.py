"""Tests of the read-only SQL sandbox: attacks, limits, messages, schema, and result matching."""

from __future__ import annotations

import dataclasses
import hashlib
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from boltzoo.envs.tools.sql import (
    QueryResult,
    SQLSandbox,
    gold_is_ordered,
    results_match,
    split_statements,
)

LONG_NAME = "The " + "Very " * 30 + "Long Band"
ARTISTS = 300
ALBUMS = 400
NUMBERS = 2000
REFUSED = "error: the query was refused: only reading (SELECT) is allowed"
TIME_LIMIT = "error: the query ran past the 1.0 s time limit"
ONE_STATEMENT = "error: only one statement per query is allowed"
BINARY = "error: the query contains binary data"
HAYSTACK = "printf('%.*c', 900000, 'a')"
NEEDLE = "(printf('%.*c', 450000, 'a') || 'b')"


def build_database(path: Path) -> None:
    """Write the test database: artists, albums (a few hundred rows each) and 2,000 numbers."""
    connection = sqlite3.connect(path)
    connection.executescript(
        """
        CREATE TABLE artists (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
        CREATE TABLE albums (
            id INTEGER PRIMARY KEY,
            title TEXT,
            artist_id INTEGER REFERENCES artists(id),
            price REAL,
            cover BLOB
        );
        CREATE INDEX albums_by_artist ON albums(artist_id);
        CREATE TABLE numbers (n INTEGER NOT NULL);
        """
    )
    names = ["AC/DC", LONG_NAME] + [f"Artist {i}" for i in range(3, ARTISTS + 1)]
    connection.executemany("INSERT INTO artists VALUES (?, ?)", enumerate(names, start=1))
    connection.executemany(
        "INSERT INTO albums VALUES (?, ?, ?, ?, ?)",
        [
            (i, f"Album {i}", i % ARTISTS + 1, i * 0.5, None if i % 2 else b"\x00\xff")
            for i in range(1, ALBUMS + 1)
        ],
    )
    connection.executemany("INSERT INTO numbers VALUES (?)", [(i,) for i in range(NUMBERS)])
    connection.commit()
    connection.close()


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def database(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("sql") / "music.db"
    build_database(path)
    return path


@pytest.fixture(scope="module")
def sandbox(database) -> SQLSandbox:
    with SQLSandbox(database) as opened:
        yield opened


def timed(sandbox: SQLSandbox, sql) -> tuple[QueryResult, float]:
    started = time.perf_counter()
    result = sandbox.execute(sql)
    return result, time.perf_counter() - started


def assert_still_works(sandbox: SQLSandbox) -> None:
    result = sandbox.execute("SELECT count(*) FROM artists")
    assert result.ok, result.error
    assert result.rows == ((ARTISTS,),)


# --- Attacks ------------------------------------------------------------------------------------

ATTACKS = [
    pytest.param("DROP TABLE artists", f"{REFUSED} (DROP TABLE)", id="drop-table"),
    pytest.param("DELETE FROM artists", f"{REFUSED} (DELETE)", id="delete"),
    pytest.param("UPDATE artists SET name='x'", f"{REFUSED} (UPDATE)", id="update"),
    pytest.param("INSERT INTO artists VALUES (999,'x')", f"{REFUSED} (INSERT)", id="insert"),
    pytest.param("REPLACE INTO artists VALUES (1,'x')", f"{REFUSED} (REPLACE)", id="replace"),
    pytest.param("CREATE TABLE evil(x)", f"{REFUSED} (CREATE TABLE)", id="create-table"),
    pytest.param("CREATE TEMP TABLE t(x)", f"{REFUSED} (CREATE TEMP TABLE)", id="create-temp"),
    pytest.param("CREATE INDEX i ON artists(name)", f"{REFUSED} (CREATE INDEX)", id="index"),
    pytest.param("ALTER TABLE artists ADD COLUMN x", f"{REFUSED} (ALTER TABLE)", id="alter"),
    pytest.param(
        "ATTACH DATABASE '{dir}/evil.db' AS evil", f"{REFUSED} (ATTACH DATABASE)", id="attach"
    ),
    pytest.param("DETACH DATABASE main", f"{REFUSED} (DETACH DATABASE)", id="detach"),
    pytest.param(
        "PRAGMA writable_schema=1", f"{REFUSED} (PRAGMA writable_schema)", id="writable-schema"
    ),
    pytest.param("PRAGMA journal_mode=WAL", f"{REFUSED} (PRAGMA journal_mode)", id="journal-mode"),
    pytest.param("PRAGMA query_only=0", f"{REFUSED} (PRAGMA query_only)", id="query-only-off"),
    pytest.param(
        "SELECT load_extension('x')", f"{REFUSED} (function load_extension())", id="extension"
    ),
    pytest.param(
        "SELECT 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!' REGEXP '(a+)+$'",
        f"{REFUSED} (function regexp())",
        id="regexp-backtracking",
    ),
    pytest.param(
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM r) SELECT count(*) FROM r",
        TIME_LIMIT,
        id="endless-recursive-cte",
    ),
    pytest.param(
        "SELECT count(*) FROM numbers a, numbers b, numbers c", TIME_LIMIT, id="cross-join"
    ),
    pytest.param(
        "SELECT * FROM numbers a, numbers b, numbers c ORDER BY random() LIMIT 1",
        TIME_LIMIT,
        id="cross-join-sort",
    ),
    pytest.param("SELECT 1; DROP TABLE artists", ONE_STATEMENT, id="select-then-drop"),
    pytest.param("SELECT * FROM artists; SELECT 1", ONE_STATEMENT, id="two-selects"),
    pytest.param("SELECT 1 /* ; */; DELETE FROM artists", ONE_STATEMENT, id="comment-then-semi"),
    pytest.param("BEGIN; DELETE FROM artists; COMMIT", ONE_STATEMENT, id="transaction-script"),
    pytest.param("SELECT \x00\x01\xff", BINARY, id="nul-bytes"),
    pytest.param("\x89PNG\r\n\x1a\n" + "\x00" * 50, BINARY, id="png-header"),
    pytest.param("SELECT 1\udcff", BINARY, id="undecodable-surrogate"),
    pytest.param("VACUUM", f"{REFUSED} (VACUUM)", id="vacuum"),
    pytest.param("VACUUM INTO '{dir}/copy.db'", f"{REFUSED} (VACUUM)", id="vacuum-into"),
    pytest.param("REINDEX", f"{REFUSED} (REINDEX)", id="reindex"),
    pytest.param("ANALYZE", f"{REFUSED} (ANALYZE)", id="analyze"),
    pytest.param("BEGIN", f"{REFUSED} (BEGIN)", id="begin"),
    pytest.param("BEGIN IMMEDIATE", f"{REFUSED} (BEGIN)", id="begin-immediate"),
    pytest.param("SAVEPOINT x", f"{REFUSED} (SAVEPOINT)", id="savepoint"),
    pytest.param("/* hello */ DROP TABLE artists", f"{REFUSED} (DROP TABLE)", id="comment-drop"),
    # Writes SQLite accepts after a WITH clause: caught by the authorizer, not by the first word.
    pytest.param(
        "WITH x AS (SELECT 1) DELETE FROM artists",
        f"{REFUSED} (DELETE FROM artists)",
        id="cte-delete",
    ),
    pytest.param(
        "WITH x AS (SELECT 1) UPDATE artists SET name = 'x'",
        f"{REFUSED} (UPDATE artists)",
        id="cte-update",
    ),
    pytest.param(
        "WITH x AS (SELECT 1) INSERT INTO artists VALUES (999, 'x')",
        f"{REFUSED} (INSERT INTO artists)",
        id="cte-insert",
    ),
    pytest.param("EXPLAIN DROP TABLE artists", REFUSED, id="explain-drop"),
    pytest.param("SELECT readfile('/etc/passwd')", "readfile", id="readfile"),
    pytest.param("x" * 1_000_000, "error: the query is too long (1,000,000 characters", id="1mb"),
]


@pytest.mark.parametrize(("sql", "message"), ATTACKS)
@pytest.mark.slow
def test_attack_is_refused_quickly_and_changes_nothing(sandbox, database, sql, message):
    sql = sql.replace("{dir}", str(database.parent))
    files_before = sorted(database.parent.iterdir())
    hash_before = digest(database)

    result, elapsed = timed(sandbox, sql)

    assert not result.ok
    assert result.error.startswith("error: ")
    assert message in result.error
    assert len(result.error) <= 300
    assert result.columns == () and result.rows == ()
    assert elapsed < 2.0
    assert digest(database) == hash_before
    assert sorted(database.parent.iterdir()) == files_before  # no evil.db, copy.db, journal
    assert_still_works(sandbox)


def test_attach_does_not_create_the_file(sandbox, database):
    target = database.parent / "attached.db"
    result = sandbox.execute(f"ATTACH DATABASE '{target}' AS evil")
    assert not result.ok and "ATTACH" in result.error
    assert not target.exists()


def test_time_limit_interrupts_while_rows_are_fetched(database):
    # The first rows come at once (execute returns); the next one is never found while fetching.
    sandbox = SQLSandbox(database, time_limit_s=0.3, max_rows=10)
    sql = (
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) "
        "SELECT n FROM r WHERE n < 3 OR n > 1e15"
    )
    result, elapsed = timed(sandbox, sql)
    assert not result.ok
    assert result.error == "error: the query ran past the 0.3 s time limit"
    assert elapsed < 1.0
    assert_still_works(sandbox)
    sandbox.close()


@pytest.mark.parametrize(
    "sql",
    [
        # Each is one call of a function that SQLite computes in quadratic time; the progress
        # handler cannot interrupt a call, so the sandbox swaps in linear versions.
        "SELECT length(trim(printf('%.*c', 100000, 'a'), printf('%.*c', 100000, 'b') || 'a'))",
        f"SELECT instr({HAYSTACK}, {NEEDLE})",
        f"SELECT length(replace({HAYSTACK}, {NEEDLE}, ''))",
    ],
    ids=["trim", "instr", "replace"],
)
def test_quadratic_string_functions_finish_quickly(sandbox, sql):
    result, elapsed = timed(sandbox, sql)
    assert result.ok, result.error
    assert elapsed < 2.0


def test_long_like_patterns_are_refused(sandbox):
    sql = "SELECT printf('%.*c', 900000, 'a') LIKE '%' || printf('%.*c', 40000, 'a') || 'b'"
    result, elapsed = timed(sandbox, sql)
    assert not result.ok
    assert "LIKE or GLOB pattern too complex" in result.error
    assert elapsed < 2.0


def test_values_cannot_grow_without_bound(sandbox):
    result, elapsed = timed(sandbox, "SELECT length(zeroblob(500000000))")
    assert not result.ok
    assert "string or blob too big" in result.error
    assert elapsed < 2.0


@pytest.mark.parametrize(
    "arguments",
    [
        "'abcabc', 'bc'",
        "'abc', ''",
        "'', 'a'",
        "NULL, 'a'",
        "'a', NULL",
        "'é€xé', '€x'",
        "12345, 34",
        "1.5, '.'",
        "0.1, '1'",
        "1e20, '0'",
        "100.0, '0'",
        "x'616263', x'62'",
        "x'616263', 'b'",
        "'  padded  ', ' '",
    ],
)
def test_linear_string_functions_agree_with_sqlite(sandbox, arguments):
    reference = sqlite3.connect(":memory:")
    for template in (
        "instr({})",
        "trim({})",
        "ltrim({})",
        "rtrim({})",
        "replace({}, 'Z')",
        "replace('xbcx', {})",
        "typeof(replace({}, 'Z'))",
    ):
        expression = template.format(arguments)
        expected = reference.execute(f"SELECT {expression}").fetchall()
        result = sandbox.execute(f"SELECT {expression}")
        assert result.ok, (expression, result.error)
        assert list(result.rows) == expected, expression
        assert [type(v) for v in result.rows[0]] == [type(v) for v in expected[0]], expression


@pytest.mark.parametrize(
    "sql",
    [
        # SQLite builds a repeated character one at a time and only then finds it too big
        # (printf('%.1000000000c', 'x') ran 7.3 s past a 1 s limit): NULL at once instead
        "SELECT printf('%.1000000000c', 'x')",
        "SELECT printf('%!.1000000000c', 'x')",
        "SELECT printf('%.*c', 1000000000, 'x')",
        "SELECT format('%1000000000d', 1)",
        "SELECT printf('%.999999c%.999999c', 'a', 'b')",
    ],
)
def test_printf_that_would_outgrow_the_value_limit_is_null_at_once(sandbox, sql):
    result, elapsed = timed(sandbox, sql)
    assert result.ok, result.error
    assert result.rows == ((None,),)
    assert elapsed < 1.0
    assert_still_works(sandbox)


@pytest.mark.parametrize(
    "expression",
    [
        "printf('%5.2f|%-4d|%s|%%|%.3c', 3.14159, 7, 'ab', 'z')",
        "printf('%.*d|%*s', 4, 7, 6, 'x')",
        "format('%d apples, %q', 3, 'it''s')",
        "printf('%.2000000s', 'abc')",  # a string's precision only cuts it
        "printf('%d')",
        "printf(NULL)",
        "printf('%x %o %e', 255, 8, 12345.678)",
        "length(printf('%.900000c', 'x'))",
    ],
)
def test_printf_agrees_with_sqlite(sandbox, expression):
    expected = sqlite3.connect(":memory:").execute(f"SELECT {expression}").fetchall()
    result = sandbox.execute(f"SELECT {expression}")
    assert result.ok, result.error
    assert list(result.rows) == expected


# --- Ordinary queries ----------------------------------------------------------------------------


def test_select_returns_plain_values(sandbox):
    result = sandbox.execute(
        "SELECT a.id, a.name, b.price, b.cover FROM artists a JOIN albums b "
        "ON b.artist_id = a.id WHERE b.id IN (2, 3) ORDER BY b.id"
    )
    assert result.ok and result.error is None and not result.truncated
    assert result.columns == ("id", "name", "price", "cover")
    assert result.rows == ((3, "Artist 3", 1.0, b"\x00\xff"), (4, "Artist 4", 1.5, None))
    assert isinstance(result.rows, tuple) and isinstance(result.rows[0], tuple)
    assert result.elapsed_s >= 0


@pytest.mark.parametrize(
    ("sql", "rows"),
    [
        ("SELECT 'a;b'", (("a;b",),)),
        ("SELECT 1;", ((1,),)),
        ("SELECT 1 ;  \n ;", ((1,),)),
        ("SELECT 1; -- done", ((1,),)),
        ("SELECT 2 /* ; */", ((2,),)),
        ('SELECT 3 AS "a;b"', ((3,),)),
        ("-- a comment\nSELECT 4", ((4,),)),
        ("VALUES (1, 'x')", ((1, "x"),)),
        ("WITH t(x) AS (SELECT 5) SELECT x FROM t", ((5,),)),
        ("SELECT ':name', '%s', '$1'", ((":name", "%s", "$1"),)),
        ("SELECT count(*) FROM json_each('[1, 2, 3]')", ((3,),)),
        ("SELECT count(*) FROM pragma_table_info('albums')", ((5,),)),
        (
            "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 10) "
            "SELECT sum(n) FROM r",
            ((55,),),
        ),
    ],
)
def test_harmless_queries_run(sandbox, sql, rows):
    result = sandbox.execute(sql)
    assert result.ok, result.error
    assert result.rows == rows


def test_read_only_pragmas_are_allowed(sandbox):
    info = sandbox.execute("PRAGMA table_info(artists)")
    assert info.ok, info.error
    assert [row[1] for row in info.rows] == ["id", "name"]
    indexes = sandbox.execute("PRAGMA index_list(albums)")
    assert indexes.ok and indexes.rows[0][1] == "albums_by_artist"
    assert sandbox.execute("PRAGMA foreign_key_list(albums)").ok


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELEC * FROM artists", 'error: near "SELEC": syntax error'),
        ("SELECT * FROM nowhere", "error: no such table: nowhere"),
        ("SELECT missing FROM artists", "error: no such column: missing"),
        ("SELECT * FROM artists WHERE", "error: incomplete input"),
        ("SELECT 'unterminated", "error: unrecognized token"),
        ("SELECT ?", "error: Incorrect number of bindings"),
        ("", "error: the query is empty"),
        ("   \n\t ", "error: the query is empty"),
        ("-- only a comment", "error: the query is empty"),
        (";", "error: the query is empty"),
    ],
)
def test_mistakes_come_back_as_messages(sandbox, sql, message):
    result = sandbox.execute(sql)
    assert not result.ok
    assert result.error.startswith(message), result.error
    assert result.to_text() == result.error
    assert_still_works(sandbox)


def test_long_error_messages_are_cut(sandbox):
    result = sandbox.execute("SELECT * FROM " + "x" * 2000)
    assert not result.ok
    assert result.error.startswith("error: no such table: xxx")
    assert len(result.error) <= 300


@pytest.mark.parametrize("bad", [None, b"SELECT 1", 42, ["SELECT 1"]])
def test_non_text_queries_are_errors(sandbox, bad):
    result = sandbox.execute(bad)
    assert not result.ok
    assert result.error == f"error: the query must be text (a str), got {type(bad).__name__}"


def test_big_results_are_truncated_at_max_rows(sandbox):
    result, elapsed = timed(sandbox, "SELECT * FROM numbers a, numbers b")
    assert result.ok and result.truncated
    assert len(result.rows) == 1000
    assert result.rows[:2] == ((0, 0), (0, 1))
    assert elapsed < 1.0  # the 4,000,000-row result never materialises


def test_exactly_max_rows_is_not_truncated(database):
    with SQLSandbox(database, max_rows=ARTISTS) as sandbox:
        result = sandbox.execute("SELECT id FROM artists")
        assert result.ok and not result.truncated and len(result.rows) == ARTISTS
        result = sandbox.execute("SELECT id FROM albums")
        assert result.ok and result.truncated and len(result.rows) == ARTISTS


def test_results_over_max_bytes_are_refused(sandbox):
    result, elapsed = timed(sandbox, "SELECT printf('%.*c', 600000, 'x') FROM numbers")
    assert not result.ok
    assert result.error == (
        "error: the result is too large (over 1,000,000 bytes); select fewer columns or add LIMIT"
    )
    assert elapsed < 2.0
    assert sandbox.execute("SELECT printf('%.*c', 600000, 'x')").ok  # one such value fits


def test_max_bytes_counts_text_and_numbers(database):
    with SQLSandbox(database, max_bytes=1000) as sandbox:
        assert sandbox.execute("SELECT id FROM artists LIMIT 100").ok  # 800 bytes
        result = sandbox.execute("SELECT id FROM artists LIMIT 200")  # 1,600 bytes
        assert not result.ok and "over 1,000 bytes" in result.error
        assert not sandbox.execute("SELECT name FROM artists").ok


@pytest.mark.slow
def test_connection_stays_usable_after_every_kind_of_error(sandbox):
    for sql in (
        "SELECT count(*) FROM numbers a, numbers b, numbers c",
        "DROP TABLE artists",
        "WITH x AS (SELECT 1) DELETE FROM artists",
        "SELEC 1",
        "SELECT printf('%.*c', 600000, 'x') FROM numbers",
    ):
        assert not sandbox.execute(sql).ok
        assert_still_works(sandbox)


def test_concurrent_queries_from_threads(sandbox):
    results: list[QueryResult] = []

    def work() -> None:
        for _ in range(20):
            results.append(sandbox.execute("SELECT count(*) FROM albums"))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 80
    assert all(result.ok and result.rows == ((ALBUMS,),) for result in results)


# --- Opening and closing ------------------------------------------------------------------------


def test_opening_by_path_str_and_url(database):
    for where in (database, str(database), f"sqlite:///{database}"):
        with SQLSandbox(where) as sandbox:
            assert sandbox.dialect == "sqlite"
            assert sandbox.table_names() == ["artists", "albums", "numbers"]


def test_closed_sandbox_returns_an_error(database):
    sandbox = SQLSandbox(database)
    sandbox.close()
    result = sandbox.execute("SELECT 1")
    assert not result.ok and result.error == "error: the SQL sandbox is closed"


def test_missing_or_invalid_database_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no SQLite database file"):
        SQLSandbox(tmp_path / "missing.db")
    assert not (tmp_path / "missing.db").exists()
    not_a_database = tmp_path / "notes.txt"
    not_a_database.write_text("hello " * 1000)
    with pytest.raises(ValueError, match="not a readable SQLite database"):
        SQLSandbox(not_a_database)
    with pytest.raises(ValueError, match="in-memory"):
        SQLSandbox("sqlite://")
    with pytest.raises(ValueError, match="time_limit_s must be positive"):
        SQLSandbox(tmp_path / "missing.db", time_limit_s=0)


# --- Schema -------------------------------------------------------------------------------------


def test_schema_has_every_table_with_example_rows(sandbox):
    schema = sandbox.schema()
    for table in ("artists", "albums", "numbers"):
        assert f"CREATE TABLE {table} (" in schema
    assert "/* 3 example rows:\nid | name\n1 | AC/DC\n" in schema
    assert "id | title | artist_id | price | cover\n1 | Album 1 | 2 | 0.5 | NULL" in schema
    assert "2 | Album 2 | 3 | 1.0 | X'00FF'" in schema
    assert "n\n0\n1\n2 */" in schema
    # Long values are cut to about 40 characters.
    long_line = next(line for line in schema.splitlines() if line.startswith("2 | The Very"))
    assert LONG_NAME not in schema
    assert len(long_line) <= len("2 | ") + 40 and long_line.endswith("...")
    assert schema.index("CREATE TABLE artists") < schema.index("CREATE TABLE albums")


def test_schema_without_rows(sandbox):
    schema = sandbox.schema(sample_rows=0)
    assert schema.count("CREATE TABLE") == 3
    assert "/*" not in schema and "AC/DC" not in schema
    one = sandbox.schema(sample_rows=1)
    assert "/* 1 example row:\nid | name\n1 | AC/DC */" in one


def test_schema_of_an_empty_table(tmp_path):
    path = tmp_path / "empty.db"
    connection = sqlite3.connect(path)
    connection.execute('CREATE TABLE "my table" (x TEXT)')
    connection.close()
    with SQLSandbox(path) as sandbox:
        schema = sandbox.schema()
        assert 'CREATE TABLE "my table" (x TEXT);' in schema
        assert "0 example rows" in schema
        assert sandbox.table_names() == ["my table"]


# --- QueryResult.to_text ------------------------------------------------------------------------


def test_to_text_shapes(sandbox):
    three = sandbox.execute("SELECT id, name FROM artists WHERE id <= 3 AND id <> 2")
    assert three.to_text() == "id | name\n1 | AC/DC\n3 | Artist 3\n(2 rows)"
    one = sandbox.execute("SELECT NULL AS empty")
    assert one.to_text() == "empty\nNULL\n(1 row)"
    none = sandbox.execute("SELECT id FROM artists WHERE id < 0")
    assert none.to_text() == "id\n(0 rows)"
    many = sandbox.execute("SELECT id FROM artists")
    text = many.to_text()
    assert text.splitlines()[0] == "id" and text.splitlines()[1] == "1"
    assert len(text.splitlines()) == 1 + 20 + 1
    assert text.endswith(f"(showing 20 of {ARTISTS} rows)")
    assert many.to_text(max_rows=2).endswith(f"(showing 2 of {ARTISTS} rows)")
    truncated = sandbox.execute("SELECT * FROM numbers a, numbers b")
    assert truncated.to_text().endswith("(showing 20 of 1000 rows; truncated at 1000 rows)")
    assert truncated.to_text(max_rows=1000, max_chars=10**6).endswith("\n(truncated at 1000 rows)")


def test_to_text_is_cut_to_max_chars_keeping_the_footer(sandbox):
    result = sandbox.execute("SELECT printf('%.*c', 50, 'x') AS x FROM numbers LIMIT 500")
    text = result.to_text(max_rows=500, max_chars=300)
    assert len(text) <= 300
    lines = text.splitlines()
    assert lines[0] == "x" and lines[1] == "x" * 50
    assert lines[-2:] == ["...", "(500 rows; text cut at 300 characters)"]
    truncated = sandbox.execute("SELECT * FROM numbers a, numbers b")
    assert truncated.to_text(max_rows=5000).endswith(
        "\n...\n(truncated at 1000 rows; text cut at 4000 characters)"
    )
    error = QueryResult(False, (), (), "error: " + "y" * 100, False, 0.0)
    assert len(error.to_text(max_chars=50)) <= 50


def test_query_result_is_frozen():
    result = QueryResult(True, ("a",), ((1,),), None, False, 0.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.ok = False


# --- results_match ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("predicted", "gold", "ordered", "expected"),
    [
        ([(1, "a"), (2, "b")], [(2, "b"), (1, "a")], False, True),  # a multiset
        ([(1, "a"), (2, "b")], [(2, "b"), (1, "a")], True, False),  # order required
        ([(1, "a"), (2, "b")], [(1, "a"), (2, "b")], True, True),
        ([(0.1 + 0.2,)], [(0.3,)], False, True),  # float tolerance
        ([(3,)], [(3.0,)], False, True),  # int and float
        ([(3,)], [(3.1,)], False, False),
        ([(123456789,)], [(123456790,)], False, False),  # two ints: exact
        ([(True,)], [(1,)], False, False),  # a bool is not a number
        ([(True,)], [(True,)], False, True),
        ([(1.0,)], [(True,)], False, False),
        ([(1, "a")], [("a", 1)], False, False),  # column order matters
        ([(1,), (1,)], [(1,)], False, False),  # duplicates count
        ([(1,), (2,)], [(1,), (1,)], False, False),
        ([(1,), (1,), (2,)], [(1,), (2,), (1,)], False, True),
        ([], [], False, True),
        ([], [], True, True),
        ([(1,)], [], False, False),
        ([(None,)], [(None,)], False, True),
        ([(None,)], [(0,)], False, False),
        ([("3",)], [(3,)], False, False),  # text is not a number
        ([(b"x",)], [(b"x",)], False, True),
        ([(1, 2)], [(1,)], False, False),
        ([(float("nan"),)], [(float("nan"),)], False, True),
        # Numbers within tolerance whose sort order differs from the other side's.
        ([(0.3, "b"), (0.30000000001, "a")], [(0.30000000001, "b"), (0.3, "a")], False, True),
    ],
)
def test_results_match(predicted, gold, ordered, expected):
    assert results_match(predicted, gold, ordered=ordered) is expected


def test_results_match_tolerances_and_row_types():
    assert results_match([(100.0,)], [(100.5,)], rel_tol=0.01)
    assert not results_match([(100.0,)], [(100.5,)])
    assert results_match([(0.0,)], [(1e-10,)])  # abs_tol
    assert results_match([[1, "a"]], ((1, "a"),))  # any sequences
    assert results_match(
        sqlite3.connect(":memory:").execute("SELECT 1, 'a'").fetchall(), [(1, "a")]
    )


# --- gold_is_ordered ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT name FROM artists ORDER BY name", True),
        ("select name from artists order by name desc limit 3", True),
        ("SELECT name FROM artists ORDER\n  BY 1", True),
        ("SELECT * FROM (SELECT name FROM artists ORDER BY name)", False),
        ("SELECT * FROM artists WHERE id IN (SELECT id FROM x ORDER BY id LIMIT 3)", False),
        ("WITH t AS (SELECT id FROM artists ORDER BY id) SELECT * FROM t", False),
        ("WITH t AS (SELECT id FROM artists) SELECT * FROM t ORDER BY id", True),
        ("SELECT 'ORDER BY x' FROM artists", False),
        ('SELECT "order by" FROM artists', False),
        ("SELECT name FROM artists -- ORDER BY name", False),
        ("SELECT name FROM artists /* ORDER BY name */", False),
        ("SELECT row_number() OVER (ORDER BY id) FROM artists", False),
        ("SELECT a FROM x UNION SELECT b FROM y ORDER BY 1", True),
        ("SELECT name FROM artists ORDER BY name;", True),
        ("SELECT border, bypass FROM t", False),
        ("SELECT name FROM artists GROUP BY name", False),
    ],
)
def test_gold_is_ordered(sql, expected):
    assert gold_is_ordered(sql) is expected


# --- split_statements ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT 1", ["SELECT 1"]),
        ("SELECT 1;", ["SELECT 1"]),
        ("  SELECT 1 ;  SELECT 2;; ", ["SELECT 1", "SELECT 2"]),
        ("SELECT 'a;b'; SELECT 2", ["SELECT 'a;b'", "SELECT 2"]),
        ("SELECT 'it''s;'", ["SELECT 'it''s;'"]),
        ('SELECT "a;b" FROM t', ['SELECT "a;b" FROM t']),
        ('SELECT "x"";" FROM t', ['SELECT "x"";" FROM t']),
        ("SELECT [a;b] FROM t", ["SELECT [a;b] FROM t"]),
        ("SELECT `a;b` FROM t", ["SELECT `a;b` FROM t"]),
        ("SELECT 1 -- a; b\n; SELECT 2", ["SELECT 1 -- a; b", "SELECT 2"]),
        ("SELECT 1 /* ; */ ; SELECT 2", ["SELECT 1 /* ; */", "SELECT 2"]),
        ("SELECT 1; -- trailing; comment", ["SELECT 1"]),
        ("SELECT 1; /* trailing */", ["SELECT 1"]),
        ("/* only */ -- comments", []),
        ("", []),
        (";;", []),
        ("SELECT 'unterminated; DROP TABLE t", ["SELECT 'unterminated; DROP TABLE t"]),
        ("SELECT 1 /* unterminated; DROP", ["SELECT 1 /* unterminated; DROP"]),
        ("SELECT $a(x;y)", ["SELECT $a(x;y)"]),  # one SQLite parameter token
        ("SELECT $a(') ; DROP TABLE t; --'", ["SELECT $a(')", "DROP TABLE t"]),
    ],
)
def test_split_statements(sql, expected):
    assert split_statements(sql) == expected
