"""Synthetic databases for sql-v0's train split: many small schemas instead of three.

A model warm-started on the three train databases maps each question template it has seen to
its query; on ``test_unseen`` (a fourth database and unseen templates) it writes a memorised
shape with the wrong names. These databases are for teaching it to read a schema: each is two
tables, a parent entity and a child entity that points to it (``<parent>_id``), drawn from
:data:`ENTITIES` with a random subset of their columns, filled from a seed, and asked about with
generic templates whose questions name the columns in words and carry literal values to copy
(names with apostrophes, hyphens, decimals). The kinds are those the train split asks of its
three databases, on other schemas: filters (=, <, >, BETWEEN, a prefix with LIKE, two
conditions, a range of years or one year of a date column), aggregates, counts, groups,
HAVING over a join, top-k, and joins.

``synthetic_tasks(n)`` builds ``n`` such databases once into ``cache_dir("sql")`` and returns
their tasks; every one is a train task (``split="train"``, ``template="synthetic/<kind>"``).
No test split draws on them: they are extra practice, and ``test`` / ``test_unseen`` measure
what transfers. ``sql-v0`` adds them to its train split with ``synthetic_databases=n``.
"""

from __future__ import annotations

import functools
import random
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from boltzoo.envs.data.cache import cache_dir
from boltzoo.envs.data.files import short_digest
from boltzoo.envs.data.sql_tasks import (
    _FIRST_NAMES,
    _LAST_NAMES,
    _US_CITIES,
    _WORLD_CITIES,
    SQLTask,
    _build_atomically,
    _connect_read_only,
    _has_answer,
    _q,
)

__all__ = ["ENTITIES", "SYNTHETIC_VERSION", "TEMPLATE_KINDS", "synthetic_db", "synthetic_tasks"]

SYNTHETIC_VERSION = 2
_TASKS_PER_DATABASE = 28  # two of each kind, where the schema has the columns it needs
_MAX_DRAWS = 400

_ADJECTIVES = (
    "Silent", "Golden", "Crimson", "Hidden", "Northern", "Quiet", "Broken", "Bright", "Ancient",
    "Wild", "Lost", "Iron", "Silver", "Blue", "Last", "Second", "Little", "Open", "Burning",
)  # fmt: skip
_NOUNS = (
    "River", "Harbor", "Garden", "Mountain", "Lantern", "Orchard", "Bridge", "Forest", "Tower",
    "Meadow", "Compass", "Falcon", "Anchor", "Comet", "Valley", "Island", "Crown", "Mill",
)  # fmt: skip
_COLOURS = ("red", "blue", "green", "black", "white", "yellow", "silver", "grey", "orange")
_COUNTRIES = (
    "Norway", "Brazil", "Japan", "Kenya", "Canada", "Chile", "Portugal", "India", "Egypt",
    "New Zealand", "South Korea", "Mexico", "Poland", "Ghana",
)  # fmt: skip


def _title(rng: random.Random) -> str:
    return f"The {rng.choice(_ADJECTIVES)} {rng.choice(_NOUNS)}"


def _named(rng: random.Random) -> str:
    return rng.choice(
        (
            f"{rng.choice(_ADJECTIVES)} {rng.choice(_NOUNS)}",
            f"{rng.choice(_LAST_NAMES)}'s {rng.choice(_NOUNS)}",
            f"{rng.choice(_NOUNS)}-{rng.randint(2, 99)}",
        )
    )


@dataclass(frozen=True)
class Column:
    """A column: its name, how questions say it, its SQL type, and how values are drawn."""

    name: str
    phrase: str  # a date column's phrase is the verb of its event: "born", "shipped"
    sql_type: str  # TEXT, INTEGER, REAL or DATE (ISO text)
    draw: Callable[[random.Random], Any]

    @property
    def numeric(self) -> bool:
        """Return whether the column holds numbers (compared with < and >)."""
        return self.sql_type in ("INTEGER", "REAL")

    @property
    def text(self) -> bool:
        """Return whether the column holds words (compared with = and LIKE)."""
        return self.sql_type == "TEXT"


@dataclass(frozen=True)
class Entity:
    """A kind of row: its table, its plural in questions, the columns that name a row, and
    the attribute columns a database draws a subset of."""

    table: str
    plural: str
    label: tuple[Column, ...]
    attributes: tuple[Column, ...]


def _text(name: str, phrase: str, values: tuple[str, ...]) -> Column:
    return Column(name, phrase, "TEXT", lambda rng: rng.choice(values))


def _int(name: str, phrase: str, low: int, high: int) -> Column:
    return Column(name, phrase, "INTEGER", lambda rng: rng.randint(low, high))


def _real(name: str, phrase: str, low: float, high: float) -> Column:
    return Column(name, phrase, "REAL", lambda rng: round(rng.uniform(low, high), 2))


_CITIES = tuple(sorted({*_US_CITIES, *(city for city, _, _ in _WORLD_CITIES)}))
_CITY = _text("city", "city", _CITIES)
_COUNTRY = _text("country", "country", _COUNTRIES)
_PERSON = (
    Column("first_name", "first name", "TEXT", lambda rng: rng.choice(_FIRST_NAMES)),
    Column("last_name", "last name", "TEXT", lambda rng: rng.choice(_LAST_NAMES)),
)


def _date(name: str, verb: str, first_year: int, last_year: int) -> Column:
    first, last = date(first_year, 1, 1).toordinal(), date(last_year, 12, 31).toordinal()
    return Column(
        name, verb, "DATE", lambda rng: date.fromordinal(rng.randint(first, last)).isoformat()
    )


def _code(prefix: str) -> Callable[[random.Random], str]:
    return lambda rng: f"{prefix}-{rng.randint(100, 9999)}"


def _label(name: str, phrase: str, draw: Callable[[random.Random], str]) -> tuple[Column, ...]:
    return (Column(name, phrase, "TEXT", draw),)


ENTITIES: tuple[Entity, ...] = (
    Entity("author", "authors", _PERSON, (
        _COUNTRY,
        _date("birth_date", "born", 1920, 1995),
        _int("awards", "number of awards", 0, 12),
        _text("language", "language", ("English", "Spanish", "French", "Hindi", "Korean")),
    )),
    Entity("book", "books", _label("title", "title", _title), (
        _text("genre", "genre", ("mystery", "fantasy", "biography", "poetry", "sci-fi")),
        _int("pages", "page count", 80, 950),
        _int("published_year", "year of publication", 1950, 2023),
        _real("price", "price", 4.5, 65.0),
    )),
    Entity("club", "clubs", _label("name", "name", _named), (
        _CITY,
        _int("founded_year", "founding year", 1880, 2020),
        _int("members", "membership", 15, 4800),
        _text("colour", "colour", _COLOURS),
    )),
    Entity("player", "players", _PERSON, (
        _COUNTRY,
        _int("age", "age", 17, 41),
        _real("height_m", "height in metres", 1.6, 2.1),
        _text("position", "position", ("goalkeeper", "defender", "midfielder", "forward")),
        _int("goals", "goals", 0, 60),
        _date("signed_date", "signed", 2008, 2024),
    )),
    Entity("warehouse", "warehouses", _label("name", "name", _named), (
        _CITY,
        _int("capacity", "capacity", 500, 90000),
        _int("opened_year", "opening year", 1965, 2022),
    )),
    Entity("shipment", "shipments", _label("code", "code", _code("SH")), (
        _real("weight_kg", "weight in kilograms", 0.5, 980.0),
        _int("crates", "number of crates", 1, 70),
        _text("status", "status", ("delivered", "in transit", "delayed", "lost")),
        _text("carrier", "carrier", ("Northwind", "Blue Anchor", "Swift-Line", "O'Hara Freight")),
        _date("shipped_date", "shipped", 2018, 2024),
    )),
    Entity("farm", "farms", _label("name", "name", _named), (
        _COUNTRY,
        _real("hectares", "area in hectares", 3.0, 850.0),
        _int("founded_year", "founding year", 1850, 2015),
        _text("crop", "main crop", ("wheat", "rice", "maize", "barley", "soy", "coffee")),
    )),
    Entity("animal", "animals", _label("name", "name", lambda rng: rng.choice(_FIRST_NAMES)), (
        _text("species", "species", ("cow", "goat", "sheep", "horse", "alpaca", "pig")),
        _date("birth_date", "born", 1999, 2023),
        _real("weight_kg", "weight in kilograms", 20.0, 900.0),
        _text("colour", "colour", _COLOURS),
    )),
    Entity("museum", "museums", _label("name", "name", _named), (
        _CITY,
        _int("visitors", "yearly visitors", 2000, 950000),
        _real("ticket_price", "ticket price", 0.0, 35.0),
    )),
    Entity("exhibit", "exhibits", _label("title", "title", _title), (
        _int("year_made", "year it was made", 1400, 2022),
        _text("material", "material", ("bronze", "oil on canvas", "marble", "wood", "glass")),
        _real("insured_value", "insured value", 1000.0, 900000.0),
        _text("room", "room", ("A-1", "A-2", "B-1", "C-3", "D-4")),
        _date("acquired_date", "acquired", 1960, 2023),
    )),
    Entity("airline", "airlines", _label("name", "name", _named), (
        _COUNTRY,
        _int("fleet_size", "fleet size", 3, 900),
        _int("founded_year", "founding year", 1920, 2020),
    )),
    Entity("flight", "flights", _label("number", "flight number", _code("FL")), (
        _text("origin", "origin", _CITIES),
        _text("destination", "destination", _CITIES),
        _int("duration_min", "duration in minutes", 40, 900),
        _int("seats", "seats", 50, 420),
        _real("fare", "fare", 39.0, 1900.0),
        _date("flight_date", "flown", 2021, 2024),
    )),
)  # fmt: skip

# Which entities can point to which: (parent, child), the child holding <parent>_id.
_PAIRS = (
    ("author", "book"), ("club", "player"), ("warehouse", "shipment"), ("farm", "animal"),
    ("museum", "exhibit"), ("airline", "flight"),
)  # fmt: skip
_BY_TABLE = {entity.table: entity for entity in ENTITIES}


@dataclass(frozen=True)
class _Table:
    entity: Entity
    columns: tuple[Column, ...]  # the attributes this database kept
    parent: str | None = None  # the table its <parent>_id points to

    @property
    def key(self) -> str:
        return f"{self.entity.table}_id"

    @property
    def label(self) -> str:
        return ", ".join(c.name for c in self.entity.label)


@dataclass(frozen=True)
class _Schema:
    parent: _Table
    child: _Table


def _schema(index: int) -> _Schema:
    rng = random.Random(f"boltzoo-sql-synthetic-{index}-v{SYNTHETIC_VERSION}")
    parent_name, child_name = _PAIRS[index % len(_PAIRS)]

    def table(name: str, parent: str | None = None) -> _Table:
        entity = _BY_TABLE[name]
        keep = max(2, len(entity.attributes) - rng.randint(0, 1))
        columns = tuple(sorted(rng.sample(entity.attributes, keep), key=entity.attributes.index))
        return _Table(entity, columns, parent)

    return _Schema(table(parent_name), table(child_name, parent_name))


def _fill(schema: _Schema, index: int) -> Callable[[sqlite3.Connection], None]:
    def fill(connection: sqlite3.Connection) -> None:
        rng = random.Random(f"boltzoo-sql-synthetic-rows-{index}-v{SYNTHETIC_VERSION}")
        counts = {schema.parent.entity.table: rng.randint(12, 30)}
        counts[schema.child.entity.table] = rng.randint(50, 140)
        for table in (schema.parent, schema.child):
            columns = [*table.entity.label, *table.columns]
            declared = [f"{table.key} INTEGER PRIMARY KEY"]
            declared += [f"{c.name} {c.sql_type} NOT NULL" for c in columns]
            if table.parent:
                key = f"{table.parent}_id"
                declared.append(f"{key} INTEGER NOT NULL REFERENCES {table.parent}({key})")
            connection.execute(f"CREATE TABLE {table.entity.table} ({', '.join(declared)})")
            names = [table.key, *(c.name for c in columns)]
            if table.parent:
                names.append(f"{table.parent}_id")
            rows = []
            for key in range(1, counts[table.entity.table] + 1):
                row = [key, *(c.draw(rng) for c in columns)]
                if table.parent:
                    row.append(rng.randint(1, counts[table.parent]))
                rows.append(row)
            marks = ", ".join("?" for _ in names)
            connection.executemany(
                f"INSERT INTO {table.entity.table} ({', '.join(names)}) VALUES ({marks})", rows
            )

    return fill


def synthetic_db(index: int) -> Path:
    """Return the SQLite file of synthetic database ``index``, built once (seeded) into
    ``cache_dir("sql")``."""
    target = cache_dir("sql") / f"synthetic{index:03d}-v{SYNTHETIC_VERSION}.sqlite"
    if not target.is_file():
        _build_atomically(target, _fill(_schema(index), index))
    return target


# --- templates: (rng, schema, connection) -> (question, gold sql) ----------------------------


def _value(connection: sqlite3.Connection, table: str, column: str, rng: random.Random) -> Any:
    values = [r[0] for r in connection.execute(f"SELECT DISTINCT {column} FROM {table} ORDER BY 1")]
    return rng.choice(values)


def _a(phrase: str) -> str:
    return ("an " if phrase[0] in "aeiou" else "a ") + phrase


def _literal(value: Any) -> str:
    return _q(value) if isinstance(value, str) else str(value)


def _filter_equal(rng: random.Random, s: _Schema, db: sqlite3.Connection) -> tuple[str, str]:
    t = rng.choice((s.parent, s.child))
    column = rng.choice([c for c in t.columns if c.text] or list(t.columns))
    value = _value(db, t.entity.table, column.name, rng)
    question = rng.choice(
        (
            f"Which {t.entity.plural} have {column.phrase} {value}?",
            f"List the {t.entity.plural} whose {column.phrase} is {value}.",
        )
    )
    sql = f"SELECT {t.label} FROM {t.entity.table} WHERE {column.name} = {_literal(value)}"
    return question, sql


def _filter_compare(rng: random.Random, s: _Schema, db: sqlite3.Connection) -> tuple[str, str]:
    t = rng.choice((s.parent, s.child))
    column = rng.choice([c for c in t.columns if c.numeric] or list(t.columns))
    value = _value(db, t.entity.table, column.name, rng)
    above = rng.random() < 0.5
    word, op = ("above", ">") if above else ("below", "<")
    question = rng.choice(
        (
            f"Which {t.entity.plural} have {_a(column.phrase)} {word} {value}?",
            f"List the {t.entity.plural} with {column.phrase} {'more' if above else 'less'} "
            f"than {value}.",
        )
    )
    sql = f"SELECT {t.label} FROM {t.entity.table} WHERE {column.name} {op} {_literal(value)}"
    return question, sql


def _filter_between(rng: random.Random, s: _Schema, db: sqlite3.Connection) -> tuple[str, str]:
    t = rng.choice((s.parent, s.child))
    column = rng.choice([c for c in t.columns if c.sql_type == "INTEGER"] or list(t.columns))
    low = _value(db, t.entity.table, column.name, rng)
    high = _value(db, t.entity.table, column.name, rng)
    low, high = min(low, high), max(low, high)
    question = f"Which {t.entity.plural} have {_a(column.phrase)} from {low} through {high}?"
    sql = (
        f"SELECT {t.label} FROM {t.entity.table} "
        f"WHERE {column.name} BETWEEN {_literal(low)} AND {_literal(high)}"
    )
    return question, sql


def _count_where(rng: random.Random, s: _Schema, db: sqlite3.Connection) -> tuple[str, str]:
    t = rng.choice((s.parent, s.child))
    column = rng.choice([c for c in t.columns if c.text] or list(t.columns))
    value = _value(db, t.entity.table, column.name, rng)
    question = f"How many {t.entity.plural} have {column.phrase} {value}?"
    sql = f"SELECT COUNT(*) FROM {t.entity.table} WHERE {column.name} = {_literal(value)}"
    return question, sql


def _aggregate(rng: random.Random, s: _Schema, db: sqlite3.Connection) -> tuple[str, str]:
    t = rng.choice((s.parent, s.child))
    numeric = [c for c in t.columns if c.numeric]
    column = rng.choice(numeric or list(t.columns))
    word, function = rng.choice(
        (("average", "AVG"), ("highest", "MAX"), ("lowest", "MIN"), ("total", "SUM"))
    )
    question = f"What is the {word} {column.phrase} of all {t.entity.plural}?"
    return question, f"SELECT {function}({column.name}) FROM {t.entity.table}"


def _group_count(rng: random.Random, s: _Schema, db: sqlite3.Connection) -> tuple[str, str]:
    t = rng.choice((s.parent, s.child))
    column = rng.choice([c for c in t.columns if c.text] or list(t.columns))
    question = rng.choice(
        (
            f"How many {t.entity.plural} are there for each {column.phrase}?",
            f"Count the {t.entity.plural} per {column.phrase}.",
        )
    )
    sql = f"SELECT {column.name}, COUNT(*) FROM {t.entity.table} GROUP BY {column.name}"
    return question, sql


def _top_k(rng: random.Random, s: _Schema, db: sqlite3.Connection) -> tuple[str, str]:
    t = rng.choice((s.parent, s.child))
    column = rng.choice([c for c in t.columns if c.numeric] or list(t.columns))
    k = rng.randint(2, 5)
    most = rng.random() < 0.5
    question = (
        f"Which {k} {t.entity.plural} have the {'highest' if most else 'lowest'} {column.phrase}?"
    )
    order = "DESC" if most else "ASC"
    sql = (
        f"SELECT {t.label} FROM {t.entity.table} ORDER BY {column.name} {order}, {t.key} LIMIT {k}"
    )
    return question, sql


def _join(rng: random.Random, s: _Schema, db: sqlite3.Connection) -> tuple[str, str]:
    parent, child = s.parent, s.child
    column = rng.choice(list(parent.entity.label) + list(parent.columns))
    value = _value(db, parent.entity.table, column.name, rng)
    question = rng.choice(
        (
            f"List the {child.entity.plural} of the {parent.entity.plural} whose "
            f"{column.phrase} is {value}.",
            f"Which {child.entity.plural} belong to {parent.entity.plural} with "
            f"{column.phrase} {value}?",
        )
    )
    labels = ", ".join(f"c.{c.name}" for c in child.entity.label)
    sql = (
        f"SELECT {labels} FROM {child.entity.table} c JOIN {parent.entity.table} p "
        f"ON c.{parent.key} = p.{parent.key} WHERE p.{column.name} = {_literal(value)}"
    )
    return question, sql


def _row(connection: sqlite3.Connection, table: str, rng: random.Random) -> dict[str, Any]:
    """One row of ``table`` by column name: values that occur together, so that conditions
    drawn from it have an answer."""
    cursor = connection.execute(f"SELECT * FROM {table} ORDER BY 1")
    names = [d[0] for d in cursor.description]
    return dict(zip(names, rng.choice(cursor.fetchall()), strict=True))


def _condition(column: Column, value: Any) -> tuple[str, str]:
    """(words, SQL) of one condition on ``column`` holding ``value``."""
    if column.sql_type == "DATE":
        return f"{column.phrase} in {value[:4]}", f"strftime('%Y', {column.name}) = {_q(value[:4])}"
    return f"{column.phrase} {value}", f"{column.name} = {_literal(value)}"


def _filter_two(rng: random.Random, s: _Schema, db: sqlite3.Connection) -> tuple[str, str] | None:
    t = rng.choice((s.parent, s.child))
    words = [c for c in t.columns if c.text]
    if not words or len(t.columns) < 2:
        return None
    first = rng.choice(words)
    second = rng.choice([c for c in t.columns if c is not first])
    row = _row(db, t.entity.table, rng)
    first_words, first_sql = _condition(first, row[first.name])
    if second.numeric:
        above = rng.random() < 0.5
        bound = row[second.name] - 1 if above else row[second.name] + 1
        bound = round(bound, 2) if second.sql_type == "REAL" else bound
        second_words = f"{_a(second.phrase)} {'above' if above else 'below'} {bound}"
        second_sql = f"{second.name} {'>' if above else '<'} {bound}"
    else:
        second_words, second_sql = _condition(second, row[second.name])
    question = rng.choice(
        (
            f"Which {t.entity.plural} with {first_words} have {second_words}?",
            f"List the {t.entity.plural} that have {second_words} and {first_words}.",
        )
    )
    # the equality on a copied value goes last (tests read the literal after the last " = ")
    sql = f"SELECT {t.label} FROM {t.entity.table} WHERE {second_sql} AND {first_sql}"
    return question, sql


def _filter_prefix(rng: random.Random, s: _Schema, db: sqlite3.Connection) -> tuple[str, str]:
    t = rng.choice((s.parent, s.child))
    column = rng.choice([c for c in (*t.entity.label, *t.columns) if c.text])
    row = _row(db, t.entity.table, rng)
    word = str(row[column.name]).split()[0]
    prefix = word[: rng.randint(1, min(3, len(word)))]
    question = rng.choice(
        (
            f'Which {t.entity.plural} have {_a(column.phrase)} starting with "{prefix}"?',
            f'List the {t.entity.plural} whose {column.phrase} begins with "{prefix}".',
        )
    )
    return (
        question,
        f"SELECT {t.label} FROM {t.entity.table} WHERE {column.name} LIKE {_q(prefix + '%')}",
    )


def _years(
    rng: random.Random, s: _Schema, db: sqlite3.Connection
) -> tuple[_Table, Column, dict] | None:
    tables = [t for t in (s.parent, s.child) if any(c.sql_type == "DATE" for c in t.columns)]
    if not tables:
        return None
    t = rng.choice(tables)
    column = next(c for c in t.columns if c.sql_type == "DATE")
    return t, column, _row(db, t.entity.table, rng)


def _filter_year_range(
    rng: random.Random, s: _Schema, db: sqlite3.Connection
) -> tuple[str, str] | None:
    found = _years(rng, s, db)
    if found is None:
        return None
    t, column, row = found
    year = int(row[column.name][:4])
    span = rng.randint(1, 4)  # a range of two to five years around a row's year
    first = year - rng.randint(0, span)
    last = first + span
    when = rng.choice((f"from {first} through {last}", f"between {first} and {last}"))
    sql = f"{column.name} BETWEEN '{first}-01-01' AND '{last}-12-31'"
    words = [c for c in t.columns if c.text]
    if words and rng.random() < 0.5:
        other = rng.choice(words)
        other_words, other_sql = _condition(other, row[other.name])
        question = f"List the {t.entity.plural} with {other_words} {column.phrase} {when}."
        sql += f" AND {other_sql}"
    else:
        question = f"Which {t.entity.plural} were {column.phrase} {when}?"
    return question, f"SELECT {t.label} FROM {t.entity.table} WHERE {sql}"


def _count_year(rng: random.Random, s: _Schema, db: sqlite3.Connection) -> tuple[str, str] | None:
    found = _years(rng, s, db)
    if found is None:
        return None
    t, column, row = found
    year = row[column.name][:4]
    question = rng.choice(
        (
            f"How many {t.entity.plural} were {column.phrase} in {year}?",
            f"Count the {t.entity.plural} {column.phrase} in {year}.",
        )
    )
    sql = f"SELECT COUNT(*) FROM {t.entity.table} WHERE strftime('%Y', {column.name}) = {_q(year)}"
    return question, sql


def _parent_named(s: _Schema, row: dict[str, Any]) -> tuple[str, str]:
    """(the parent's name as a question writes it, the SQL condition on p.<label>)."""
    labels = s.parent.entity.label
    name = " ".join(str(row[c.name]) for c in labels)
    return name, " AND ".join(f"p.{c.name} = {_literal(row[c.name])}" for c in labels)


def _count_join(rng: random.Random, s: _Schema, db: sqlite3.Connection) -> tuple[str, str]:
    parent, child = s.parent, s.child
    name, condition = _parent_named(s, _row(db, parent.entity.table, rng))
    question = rng.choice(
        (
            f"How many {child.entity.plural} belong to the {parent.entity.table} {name}?",
            f"Count the {child.entity.plural} of the {parent.entity.table} {name}.",
        )
    )
    sql = (
        f"SELECT COUNT(*) FROM {child.entity.table} c JOIN {parent.entity.table} p "
        f"ON c.{parent.key} = p.{parent.key} WHERE {condition}"
    )
    return question, sql


def _group_having(rng: random.Random, s: _Schema, db: sqlite3.Connection) -> tuple[str, str]:
    parent, child = s.parent, s.child
    counts = [
        n for (n,) in db.execute(f"SELECT COUNT(*) FROM {child.entity.table} GROUP BY {parent.key}")
    ]
    more = rng.choice(counts) - 1
    question = rng.choice(
        (
            f"Which {parent.entity.plural} have more than {more} {child.entity.plural}?",
            f"List the {parent.entity.plural} with over {more} {child.entity.plural}.",
        )
    )
    labels = ", ".join(f"p.{c.name}" for c in parent.entity.label)
    sql = (
        f"SELECT {labels} FROM {parent.entity.table} p JOIN {child.entity.table} c "
        f"ON c.{parent.key} = p.{parent.key} GROUP BY p.{parent.key} HAVING COUNT(*) > {more}"
    )
    return question, sql


# a kind returns None where this schema has no column it needs (no date column)
_Kind = Callable[[random.Random, _Schema, sqlite3.Connection], "tuple[str, str] | None"]
_TEMPLATES: dict[str, _Kind] = {
    "filter_equal": _filter_equal,
    "filter_compare": _filter_compare,
    "filter_between": _filter_between,
    "count_where": _count_where,
    "aggregate": _aggregate,
    "group_count": _group_count,
    "top_k": _top_k,
    "join": _join,
    "filter_two": _filter_two,
    "filter_prefix": _filter_prefix,
    "filter_year_range": _filter_year_range,
    "count_year": _count_year,
    "count_join": _count_join,
    "group_having": _group_having,
}
TEMPLATE_KINDS: tuple[str, ...] = tuple(_TEMPLATES)


@functools.lru_cache(maxsize=4)
def _tasks(databases: int, cache: str) -> tuple[SQLTask, ...]:
    del cache  # part of the lru key only
    tasks: list[SQLTask] = []
    for index in range(databases):
        path = synthetic_db(index)
        schema = _schema(index)
        db_id = f"synthetic{index:03d}"
        rng = random.Random(f"boltzoo-sql-synthetic-tasks-{index}-v{SYNTHETIC_VERSION}")
        connection = _connect_read_only(path)
        seen: set[str] = set()
        try:
            for draw in range(_MAX_DRAWS):
                if len(seen) >= _TASKS_PER_DATABASE:
                    break
                kind = TEMPLATE_KINDS[draw % len(TEMPLATE_KINDS)]  # every kind in turn
                drawn = _TEMPLATES[kind](rng, schema, connection)
                if drawn is None:
                    continue
                question, sql = drawn
                if question in seen or not _has_answer(connection, sql):
                    continue
                seen.add(question)
                hashed = f"{db_id}\n{question}"  # as the generated tasks' ids are made
                task_id = f"{db_id}-{short_digest(hashed)}"
                tasks.append(
                    SQLTask(task_id, question, sql, db_id, str(path), f"synthetic/{kind}", "train")
                )
        finally:
            connection.close()
    return tuple(tasks)


def synthetic_tasks(databases: int) -> list[SQLTask]:
    """Return the train tasks of synthetic databases ``0 .. databases - 1`` (28 each,
    every template kind in turn), building the databases that are not cached yet."""
    if databases < 0:
        raise ValueError(f"databases must be 0 or more, got {databases}")
    return list(_tasks(int(databases), str(cache_dir("sql"))))
