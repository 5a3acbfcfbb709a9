"""Synthetic databases for sql-v0's train split: many small schemas instead of three.

A model warm-started on the three train databases maps each question template it has seen to
its query; on ``test_unseen`` (a fourth database and unseen templates) it writes a memorised
shape with the wrong names. These databases are for teaching it to read a schema: by default two
tables, a parent entity and a child entity that points to it (``<parent>_id``), drawn from
:data:`ENTITIES` with a random subset of their columns, filled from a seed, and asked about with
generic templates whose questions name the columns in words and carry literal values to copy
(names with apostrophes, hyphens, decimals). The kinds are those the train split asks of its
three databases, on other schemas: filters (=, <, >, BETWEEN, a prefix with LIKE, two
conditions, a range of years or one year of a date column), aggregates, counts, groups,
HAVING over a join, top-k, and joins.

``tables=4`` gives databases of another shape: a unit (a store, a school, ...), its staff, the
people they serve and the events between a staff member and a person (a sale, a lesson, ...),
each event with a date, a status, an amount and a detail. Their questions are the two-table
kinds on the parent/child pairs inside, and kinds that join three or four tables: counts and
aggregates of events of a named staff member or unit in a year, HAVING and GROUP BY over the
joins, the people who met a staff member in a month, distinct details, and people filters said
the way people say them ("customers from Oslo").

``kinds="extended"`` adds to the four-table databases the shapes the base kinds leave out
(:data:`EXTENDED_KINDS`): NOT IN and IN through a chain of joins ("customers who never had a
sale in 2021", "... who have had sales at the store X"), INTERSECT ("at both the store X and
the store Y"), comparisons with an average in WHERE and HAVING, HAVING over a filtered group, a
total per detail value, COUNT(DISTINCT ...), the best month of a year, and the largest or most
common row. They are drawn after the base tasks, so a database's base tasks do not change.

``synthetic_tasks(n, tables, kinds)`` builds ``n`` such databases once into ``cache_dir("sql")`` and
returns their tasks; every one is a train task (``split="train"``, ``template="synthetic/<kind>"``).
No test split draws on them: they are extra practice, and ``test`` / ``test_unseen`` measure
what transfers. ``sql-v0`` adds them to its train split with ``synthetic_databases=n`` (and
``synthetic_tables=4``, ``synthetic_kinds="extended"``).
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
from boltzoo.envs.data.sql_common import (
    FIRST_NAMES,
    LAST_NAMES,
    US_CITIES,
    WORLD_CITIES,
    SQLTask,
    build_atomically,
    connect_read_only,
    has_answer,
    quote,
)

__all__ = [
    "ENTITIES",
    "EXTENDED_KINDS",
    "KIND_SETS",
    "STAR_ENTITIES",
    "STAR_WORLDS",
    "STAR_KINDS",
    "SYNTHETIC_VERSION",
    "TABLE_COUNTS",
    "TEMPLATE_KINDS",
    "synthetic_db",
    "synthetic_tasks",
]

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
            f"{rng.choice(LAST_NAMES)}'s {rng.choice(_NOUNS)}",
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
    about: str = ""  # how a question may say "has this value" instead: "from {}", "on the {} plan"

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


def _text(name: str, phrase: str, values: tuple[str, ...], about: str = "") -> Column:
    return Column(name, phrase, "TEXT", lambda rng: rng.choice(values), about)


def _int(name: str, phrase: str, low: int, high: int) -> Column:
    return Column(name, phrase, "INTEGER", lambda rng: rng.randint(low, high))


def _real(name: str, phrase: str, low: float, high: float) -> Column:
    return Column(name, phrase, "REAL", lambda rng: round(rng.uniform(low, high), 2))


_CITIES = tuple(sorted({*US_CITIES, *(city for city, _, _ in WORLD_CITIES)}))
_CITY = _text("city", "city", _CITIES, about="from {}")
_COUNTRY = _text("country", "country", _COUNTRIES, about="from {}")
_PERSON = (
    Column("first_name", "first name", "TEXT", lambda rng: rng.choice(FIRST_NAMES)),
    Column("last_name", "last name", "TEXT", lambda rng: rng.choice(LAST_NAMES)),
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
    Entity("animal", "animals", _label("name", "name", lambda rng: rng.choice(FIRST_NAMES)), (
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

# Four-table databases (``tables=4``): a unit, its staff, the people they serve, and the events
# that join a staff member to a person on a date. Every event keeps all of its columns: a DATE,
# a ``status``, a REAL amount and a TEXT detail, which the star kinds below ask about; every
# person keeps its TEXT column too.
def _places(table: str, plural: str, *attributes: Column) -> Entity:
    """A star's units: rows named by a made-up name ("Blue Harbour")."""
    return Entity(table, plural, _label("name", "name", _named), attributes)


def _people(table: str, plural: str, *attributes: Column) -> Entity:
    """A star's staff or the people they serve: rows named by a first and a last name."""
    return Entity(table, plural, _PERSON, attributes)


def _events(
    table: str, plural: str, code: str, when: Column, statuses: tuple[str, ...], amount: Column,
    detail: Column,
) -> Entity:
    """A star's events, named by a code ("SA-1234"), with the four columns the star kinds ask
    about: a date, a status, an amount (REAL) and a detail (TEXT)."""
    status = _text("status", "status", statuses)
    label = _label("code", "code", _code(code))
    return Entity(table, plural, label, (when, status, amount, detail))


# Four-table worlds (unit, staff, person, event): staff hold <unit>_id; events hold <staff>_id and
# <person>_id.
STAR_WORLDS: tuple[tuple[Entity, Entity, Entity, Entity], ...] = (
    (
        _places("store", "stores", _CITY, _int("opened_year", "opening year", 1960, 2022),
                _real("floor_area", "floor area", 80.0, 4000.0)),
        _people("employee", "employees",
                _text("role", "role", ("cashier", "manager", "clerk", "buyer")),
                _date("hired_date", "hired", 1995, 2023),
                _real("salary", "salary", 21000.0, 98000.0)),
        _people("customer", "customers", _CITY,
                _text("plan", "plan", ("basic", "plus", "premium"), about="on the {} plan"),
                _date("birth_date", "born", 1940, 2005)),
        _events("sale", "sales", "SA", _date("sale_date", "made", 2019, 2024),
                ("paid", "refunded", "pending"), _real("amount", "amount", 3.0, 900.0),
                _text("payment", "payment method", ("cash", "card", "voucher", "gift-card"))),
    ),
    (
        _places("school", "schools", _CITY, _int("founded_year", "founding year", 1850, 2015),
                _int("pupils", "number of pupils", 120, 2400)),
        _people("teacher", "teachers",
                _text("subject", "subject", ("maths", "music", "biology", "French", "art")),
                _date("hired_date", "hired", 1990, 2023),
                _real("salary", "salary", 28000.0, 87000.0)),
        _people("student", "students", _CITY, _int("grade", "grade", 1, 12),
                _date("birth_date", "born", 2004, 2018)),
        _events("lesson", "lessons", "LS", _date("lesson_date", "given", 2019, 2024),
                ("held", "cancelled", "moved"), _real("fee", "fee", 10.0, 140.0),
                _text("topic", "topic", ("algebra", "grammar", "chemistry", "history", "drawing"))),
    ),
    (
        _places("garage", "garages", _CITY, _int("bays", "number of bays", 2, 30)),
        _people("mechanic", "mechanics",
                _text("specialty", "specialty", ("engines", "brakes", "electrics", "bodywork")),
                _date("hired_date", "hired", 1998, 2023),
                _real("hourly_rate", "hourly rate", 18.0, 95.0)),
        _people("client", "clients", _CITY,
                _text("vehicle", "vehicle", ("van", "sedan", "truck", "motorbike", "e-bike")),
                _date("since_date", "registered", 2005, 2023)),
        _events("repair", "repairs", "RP", _date("repair_date", "done", 2019, 2024),
                ("finished", "waiting", "cancelled"), _real("cost", "cost", 25.0, 4800.0),
                _text("job", "job",
                      ("oil change", "new tyres", "brake pads", "battery", "re-spray"))),
    ),
    (
        _places("gym", "gyms", _CITY, _int("opened_year", "opening year", 1975, 2023)),
        _people("trainer", "trainers",
                _text("speciality", "speciality", ("yoga", "boxing", "pilates", "strength")),
                _date("hired_date", "hired", 2001, 2023), _real("rating", "rating", 2.5, 5.0)),
        _people("member", "members", _COUNTRY,
                _text("membership", "membership", ("monthly", "yearly", "student")),
                _date("birth_date", "born", 1950, 2006)),
        _events("session", "sessions", "SE", _date("session_date", "held", 2019, 2024),
                ("attended", "missed", "cancelled"), _real("price", "price", 8.0, 120.0),
                _text("goal", "goal", ("fitness", "rehab", "weight loss", "strength"))),
    ),
    (
        _places("hotel", "hotels", _CITY, _int("stars", "star rating", 1, 5)),
        _people("clerk", "clerks", _text("shift", "shift", ("morning", "evening", "night")),
                _date("hired_date", "hired", 2000, 2023), _real("wage", "wage", 12.0, 41.0)),
        _people("guest", "guests", _COUNTRY,
                _text("tier", "tier", ("standard", "gold", "platinum")),
                _date("birth_date", "born", 1935, 2004)),
        _events("booking", "bookings", "BK", _date("booking_date", "made", 2019, 2024),
                ("confirmed", "cancelled", "no-show"), _real("price", "price", 45.0, 2600.0),
                _text("purpose", "purpose", ("business", "holiday", "conference", "family visit"))),
    ),
)  # fmt: skip
STAR_ENTITIES: tuple[Entity, ...] = tuple(entity for world in STAR_WORLDS for entity in world)
_BY_TABLE = {entity.table: entity for entity in (*ENTITIES, *STAR_ENTITIES)}
TABLE_COUNTS = (2, 4)


@dataclass(frozen=True)
class _Table:
    entity: Entity
    columns: tuple[Column, ...]  # the attributes this database kept
    rows: tuple[int, int]  # how many rows it gets: from, to
    parents: tuple[str, ...] = ()  # the tables its <parent>_id columns point to

    @property
    def key(self) -> str:
        return f"{self.entity.table}_id"

    @property
    def label(self) -> str:
        return ", ".join(c.name for c in self.entity.label)

    def aliased_label(self, alias: str) -> str:
        """The label columns as selected from ``<table> <alias>``: "st.first_name, ..."."""
        return ", ".join(f"{alias}.{c.name}" for c in self.entity.label)


@dataclass(frozen=True)
class _Schema:
    parent: _Table
    child: _Table

    @property
    def tables(self) -> tuple[_Table, ...]:
        return (self.parent, self.child)


@dataclass(frozen=True)
class _Star:
    unit: _Table
    staff: _Table
    person: _Table
    event: _Table

    @property
    def tables(self) -> tuple[_Table, ...]:
        return (self.unit, self.staff, self.person, self.event)

    @property
    def pairs(self) -> tuple[_Schema, ...]:
        """The parent/child pairs inside it, which the two-table kinds ask about."""
        return (
            _Schema(self.unit, self.staff),
            _Schema(self.staff, self.event),
            _Schema(self.person, self.event),
        )


def _draw_table(
    rng: random.Random, name: str, rows: tuple[int, int], *parents: str, keep_all: bool = False
) -> _Table:
    entity = _BY_TABLE[name]
    keep = (
        len(entity.attributes) if keep_all else max(2, len(entity.attributes) - rng.randint(0, 1))
    )
    columns = tuple(sorted(rng.sample(entity.attributes, keep), key=entity.attributes.index))
    return _Table(entity, columns, rows, parents)


def _schema(index: int, tables: int = 2) -> _Schema | _Star:
    if tables == 4:
        rng = random.Random(f"boltzoo-sql-synthetic-t4-{index}-v{SYNTHETIC_VERSION}")
        unit, staff, person, event = (e.table for e in STAR_WORLDS[index % len(STAR_WORLDS)])
        return _Star(
            _draw_table(rng, unit, (3, 7)),
            _draw_table(rng, staff, (12, 28), unit),
            _draw_table(rng, person, (30, 80), keep_all=True),  # the kinds ask of its TEXT column
            _draw_table(rng, event, (250, 450), staff, person, keep_all=True),
        )
    rng = random.Random(f"boltzoo-sql-synthetic-{index}-v{SYNTHETIC_VERSION}")
    parent_name, child_name = _PAIRS[index % len(_PAIRS)]
    return _Schema(
        _draw_table(rng, parent_name, (12, 30)),
        _draw_table(rng, child_name, (50, 140), parent_name),
    )


def _fill(schema: _Schema | _Star, seed: str) -> Callable[[sqlite3.Connection], None]:
    def fill(connection: sqlite3.Connection) -> None:
        rng = random.Random(seed)
        counts = {t.entity.table: rng.randint(*t.rows) for t in schema.tables}
        for table in schema.tables:
            columns = [*table.entity.label, *table.columns]
            declared = [f"{table.key} INTEGER PRIMARY KEY"]
            declared += [f"{c.name} {c.sql_type} NOT NULL" for c in columns]
            for parent in table.parents:
                key = f"{parent}_id"
                declared.append(f"{key} INTEGER NOT NULL REFERENCES {parent}({key})")
            connection.execute(f"CREATE TABLE {table.entity.table} ({', '.join(declared)})")
            names = [table.key, *(c.name for c in columns), *(f"{p}_id" for p in table.parents)]
            rows = []
            for key in range(1, counts[table.entity.table] + 1):
                row = [key, *(c.draw(rng) for c in columns)]
                row += [rng.randint(1, counts[parent]) for parent in table.parents]
                rows.append(row)
            marks = ", ".join("?" for _ in names)
            connection.executemany(
                f"INSERT INTO {table.entity.table} ({', '.join(names)}) VALUES ({marks})", rows
            )

    return fill


def _db_id(index: int, tables: int) -> str:
    return f"synthetic{index:03d}" if tables == 2 else f"synthetic{index:03d}t{tables}"


def synthetic_db(index: int, tables: int = 2) -> Path:
    """Return the SQLite file of synthetic database ``index`` with ``tables`` tables (2 or 4),
    built once (seeded) into ``cache_dir("sql")``."""
    if tables not in TABLE_COUNTS:
        raise ValueError(f"tables must be one of {TABLE_COUNTS}, got {tables}")
    target = cache_dir("sql") / f"{_db_id(index, tables)}-v{SYNTHETIC_VERSION}.sqlite"
    if not target.is_file():
        seed = "" if tables == 2 else f"t{tables}-"
        seed = f"boltzoo-sql-synthetic-{seed}rows-{index}-v{SYNTHETIC_VERSION}"
        build_atomically(target, _fill(_schema(index, tables), seed))
    return target


# --- templates: (rng, schema, connection) -> (question, gold sql) ----------------------------


def _value(connection: sqlite3.Connection, table: str, column: str, rng: random.Random) -> Any:
    values = [r[0] for r in connection.execute(f"SELECT DISTINCT {column} FROM {table} ORDER BY 1")]
    return rng.choice(values)


def _a(phrase: str) -> str:
    return ("an " if phrase[0] in "aeiou" else "a ") + phrase


def _literal(value: Any) -> str:
    return quote(value) if isinstance(value, str) else str(value)


# A kind draws a (question, SQL) pair: the question is one phrasing, or a tuple of phrasings that
# _draw_task picks from as the kind's last draw.
_Drawn = tuple["str | tuple[str, ...]", str]


def _filter_equal(rng: random.Random, s: _Schema, db: sqlite3.Connection) -> _Drawn:
    t = rng.choice((s.parent, s.child))
    column = rng.choice([c for c in t.columns if c.text] or list(t.columns))
    value = _value(db, t.entity.table, column.name, rng)
    question = (
        f"Which {t.entity.plural} have {column.phrase} {value}?",
        f"List the {t.entity.plural} whose {column.phrase} is {value}.",
    )
    sql = f"SELECT {t.label} FROM {t.entity.table} WHERE {column.name} = {_literal(value)}"
    return question, sql


def _filter_compare(rng: random.Random, s: _Schema, db: sqlite3.Connection) -> _Drawn:
    t = rng.choice((s.parent, s.child))
    column = rng.choice([c for c in t.columns if c.numeric] or list(t.columns))
    value = _value(db, t.entity.table, column.name, rng)
    above = rng.random() < 0.5
    word, op = ("above", ">") if above else ("below", "<")
    question = (
        f"Which {t.entity.plural} have {_a(column.phrase)} {word} {value}?",
        f"List the {t.entity.plural} with {column.phrase} {'more' if above else 'less'} "
        f"than {value}.",
    )
    sql = f"SELECT {t.label} FROM {t.entity.table} WHERE {column.name} {op} {_literal(value)}"
    return question, sql


def _filter_between(rng: random.Random, s: _Schema, db: sqlite3.Connection) -> _Drawn:
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


def _count_where(rng: random.Random, s: _Schema, db: sqlite3.Connection) -> _Drawn:
    t = rng.choice((s.parent, s.child))
    column = rng.choice([c for c in t.columns if c.text] or list(t.columns))
    value = _value(db, t.entity.table, column.name, rng)
    question = f"How many {t.entity.plural} have {column.phrase} {value}?"
    sql = f"SELECT COUNT(*) FROM {t.entity.table} WHERE {column.name} = {_literal(value)}"
    return question, sql


def _aggregate(rng: random.Random, s: _Schema, db: sqlite3.Connection) -> _Drawn:
    t = rng.choice((s.parent, s.child))
    numeric = [c for c in t.columns if c.numeric]
    column = rng.choice(numeric or list(t.columns))
    word, function = rng.choice(
        (("average", "AVG"), ("highest", "MAX"), ("lowest", "MIN"), ("total", "SUM"))
    )
    question = f"What is the {word} {column.phrase} of all {t.entity.plural}?"
    return question, f"SELECT {function}({column.name}) FROM {t.entity.table}"


def _group_count(rng: random.Random, s: _Schema, db: sqlite3.Connection) -> _Drawn:
    t = rng.choice((s.parent, s.child))
    column = rng.choice([c for c in t.columns if c.text] or list(t.columns))
    question = (
        f"How many {t.entity.plural} are there for each {column.phrase}?",
        f"Count the {t.entity.plural} per {column.phrase}.",
    )
    sql = f"SELECT {column.name}, COUNT(*) FROM {t.entity.table} GROUP BY {column.name}"
    return question, sql


def _top_k(rng: random.Random, s: _Schema, db: sqlite3.Connection) -> _Drawn:
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


def _join(rng: random.Random, s: _Schema, db: sqlite3.Connection) -> _Drawn:
    parent, child = s.parent, s.child
    column = rng.choice(list(parent.entity.label) + list(parent.columns))
    value = _value(db, parent.entity.table, column.name, rng)
    question = (
        f"List the {child.entity.plural} of the {parent.entity.plural} whose "
        f"{column.phrase} is {value}.",
        f"Which {child.entity.plural} belong to {parent.entity.plural} with "
        f"{column.phrase} {value}?",
    )
    labels = child.aliased_label("c")
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
        return (
            f"{column.phrase} in {value[:4]}",
            f"strftime('%Y', {column.name}) = {quote(value[:4])}",
        )
    return f"{column.phrase} {value}", f"{column.name} = {_literal(value)}"


def _filter_two(rng: random.Random, s: _Schema, db: sqlite3.Connection) -> _Drawn | None:
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
    question = (
        f"Which {t.entity.plural} with {first_words} have {second_words}?",
        f"List the {t.entity.plural} that have {second_words} and {first_words}.",
    )
    # the equality on a copied value goes last (tests read the literal after the last " = ")
    sql = f"SELECT {t.label} FROM {t.entity.table} WHERE {second_sql} AND {first_sql}"
    return question, sql


def _filter_prefix(rng: random.Random, s: _Schema, db: sqlite3.Connection) -> _Drawn:
    t = rng.choice((s.parent, s.child))
    column = rng.choice([c for c in (*t.entity.label, *t.columns) if c.text])
    row = _row(db, t.entity.table, rng)
    word = str(row[column.name]).split()[0]
    prefix = word[: rng.randint(1, min(3, len(word)))]
    question = (
        f'Which {t.entity.plural} have {_a(column.phrase)} starting with "{prefix}"?',
        f'List the {t.entity.plural} whose {column.phrase} begins with "{prefix}".',
    )
    return (
        question,
        f"SELECT {t.label} FROM {t.entity.table} WHERE {column.name} LIKE {quote(prefix + '%')}",
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
) -> _Drawn | None:
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


def _count_year(rng: random.Random, s: _Schema, db: sqlite3.Connection) -> _Drawn | None:
    found = _years(rng, s, db)
    if found is None:
        return None
    t, column, row = found
    year = row[column.name][:4]
    question = (
        f"How many {t.entity.plural} were {column.phrase} in {year}?",
        f"Count the {t.entity.plural} {column.phrase} in {year}.",
    )
    sql = (
        f"SELECT COUNT(*) FROM {t.entity.table} WHERE strftime('%Y', {column.name}) = {quote(year)}"
    )
    return question, sql


def _named_row(t: _Table, row: dict[str, Any], alias: str) -> tuple[str, str]:
    """(the row's name as a question writes it, the SQL condition on <alias>.<label>)."""
    labels = t.entity.label
    name = " ".join(str(row[c.name]) for c in labels)
    return name, " AND ".join(f"{alias}.{c.name} = {_literal(row[c.name])}" for c in labels)


def _count_join(rng: random.Random, s: _Schema, db: sqlite3.Connection) -> _Drawn:
    parent, child = s.parent, s.child
    name, condition = _named_row(parent, _row(db, parent.entity.table, rng), "p")
    question = (
        f"How many {child.entity.plural} belong to the {parent.entity.table} {name}?",
        f"Count the {child.entity.plural} of the {parent.entity.table} {name}.",
    )
    sql = (
        f"SELECT COUNT(*) FROM {child.entity.table} c JOIN {parent.entity.table} p "
        f"ON c.{parent.key} = p.{parent.key} WHERE {condition}"
    )
    return question, sql


def _group_having(rng: random.Random, s: _Schema, db: sqlite3.Connection) -> _Drawn:
    parent, child = s.parent, s.child
    counts = [
        n for (n,) in db.execute(f"SELECT COUNT(*) FROM {child.entity.table} GROUP BY {parent.key}")
    ]
    more = rng.choice(counts) - 1
    question = (
        f"Which {parent.entity.plural} have more than {more} {child.entity.plural}?",
        f"List the {parent.entity.plural} with over {more} {child.entity.plural}.",
    )
    labels = parent.aliased_label("p")
    sql = (
        f"SELECT {labels} FROM {parent.entity.table} p JOIN {child.entity.table} c "
        f"ON c.{parent.key} = p.{parent.key} GROUP BY p.{parent.key} HAVING COUNT(*) > {more}"
    )
    return question, sql


# --- four-table kinds: (rng, star, connection) -> (question, gold sql) ------------------------
# Each starts from one event row and the staff member, unit and person it joins, so that every
# condition drawn has an answer; the questions name values to copy (names, a status, a year or
# a month) and the query joins the tables between them.

_MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)  # fmt: skip


def _month(day: str) -> str:
    """'2021-03-14' -> 'March 2021'."""
    return f"{_MONTHS[int(day[5:7]) - 1]} {day[:4]}"


@dataclass(frozen=True)
class _Event:
    """One event row with the rows it joins, and the event columns the kinds ask about."""

    event: dict[str, Any]
    staff: dict[str, Any]
    unit: dict[str, Any]
    person: dict[str, Any]
    when: Column  # the DATE column
    status: Column
    amount: Column  # the REAL column
    detail: Column  # the other TEXT column

    @property
    def day(self) -> str:
        """The event's date (ISO)."""
        return self.event[self.when.name]

    @property
    def year(self) -> str:
        return self.day[:4]

    @property
    def state(self) -> str:
        """The event's status value ("paid", "cancelled")."""
        return self.event[self.status.name]


def _event(rng: random.Random, s: _Star, db: sqlite3.Connection) -> _Event:
    event = _row(db, s.event.entity.table, rng)

    def one(t: _Table, key: int) -> dict[str, Any]:
        cursor = db.execute(f"SELECT * FROM {t.entity.table} WHERE {t.key} = ?", (key,))
        return dict(zip([d[0] for d in cursor.description], cursor.fetchone(), strict=True))

    staff = one(s.staff, event[s.staff.key])
    columns = s.event.columns
    return _Event(
        event,
        staff,
        one(s.unit, staff[s.unit.key]),
        one(s.person, event[s.person.key]),
        next(c for c in columns if c.sql_type == "DATE"),
        next(c for c in columns if c.name == "status"),
        next(c for c in columns if c.sql_type == "REAL"),
        next(c for c in columns if c.text and c.name != "status"),
    )


def _joins(s: _Star, *tables: str) -> str:
    """FROM the event table ``e``, joined to the staff ``st``, unit ``u`` and person ``pe``
    tables named in ``tables``."""
    joins = [f"FROM {s.event.entity.table} e"]
    if "staff" in tables or "unit" in tables:
        joins.append(f"JOIN {s.staff.entity.table} st ON e.{s.staff.key} = st.{s.staff.key}")
    if "unit" in tables:
        joins.append(f"JOIN {s.unit.entity.table} u ON st.{s.unit.key} = u.{s.unit.key}")
    if "person" in tables:
        joins.append(f"JOIN {s.person.entity.table} pe ON e.{s.person.key} = pe.{s.person.key}")
    return " ".join(joins)


def _year_sql(column: Column, year: str) -> str:
    return f"strftime('%Y', e.{column.name}) = {quote(year)}"


def _person_condition(rng: random.Random, s: _Star, row: dict[str, Any]) -> tuple[str, str]:
    """(words, SQL on ``pe``) for one TEXT column of the person: "from Oslo", "on the plus plan"."""
    column = rng.choice([c for c in s.person.columns if c.text])
    value = row[column.name]
    words = column.about.format(value) if column.about else f"with {column.phrase} {value}"
    return words, f"pe.{column.name} = {quote(value)}"


def _star_count(rng: random.Random, s: _Star, db: sqlite3.Connection) -> _Drawn:
    found = _event(rng, s, db)
    staff = s.staff.entity
    name, named = _named_row(s.staff, found.staff, "st")
    status, year = found.state, found.year
    question = (
        f"How many {status} {s.event.entity.plural} did the {staff.table} {name} have "
        f"in {year}?",
        f"Count the {s.event.entity.plural} of {staff.table} {name} with status {status} "
        f"in {year}.",
    )
    sql = (
        f"SELECT COUNT(*) {_joins(s, 'staff')} WHERE e.status = {quote(status)} AND "
        f"{_year_sql(found.when, year)} AND {named}"
    )
    return question, sql


def _star_aggregate(rng: random.Random, s: _Star, db: sqlite3.Connection) -> _Drawn:
    found = _event(rng, s, db)
    name, named = _named_row(s.unit, found.unit, "u")
    status, year = found.state, found.year
    word, function = rng.choice(
        (("average", "AVG"), ("highest", "MAX"), ("lowest", "MIN"), ("total", "SUM"))
    )
    question = (
        f"What is the {word} {found.amount.phrase} of the {status} {s.event.entity.plural} "
        f"at the {s.unit.entity.table} {name} in {year}?"
    )
    sql = (
        f"SELECT {function}(e.{found.amount.name}) {_joins(s, 'unit')} WHERE "
        f"e.status = {quote(status)} AND {_year_sql(found.when, year)} AND {named}"
    )
    return question, sql


def _star_having(rng: random.Random, s: _Star, db: sqlite3.Connection) -> _Drawn:
    found = _event(rng, s, db)
    year = found.year
    staff = s.staff
    grouped = f"{_joins(s, 'staff')} WHERE {_year_sql(found.when, year)} GROUP BY st.{staff.key}"
    more = rng.choice([n for (n,) in db.execute(f"SELECT COUNT(*) {grouped}")]) - 1
    question = (
        f"Which {staff.entity.plural} had more than {more} {s.event.entity.plural} "
        f"{found.when.phrase} in {year}?",
        f"List the {staff.entity.plural} with over {more} {s.event.entity.plural} in {year}.",
    )
    labels = staff.aliased_label("st")
    return question, f"SELECT {labels} {grouped} HAVING COUNT(*) > {more}"


def _star_breakdown(rng: random.Random, s: _Star, db: sqlite3.Connection) -> _Drawn:
    found = _event(rng, s, db)
    status, year = found.state, found.year
    unit = s.unit
    question = (
        f"How many {status} {s.event.entity.plural} did each {unit.entity.table} have "
        f"in {year}?",
        f"Give the number of {s.event.entity.plural} with status {status} per "
        f"{unit.entity.table} in {year}.",
    )
    labels = unit.aliased_label("u")
    sql = (
        f"SELECT {labels}, COUNT(*) {_joins(s, 'unit')} WHERE {_year_sql(found.when, year)} "
        f"AND e.status = {quote(status)} GROUP BY u.{unit.key}"
    )
    return question, sql


def _star_bridge(rng: random.Random, s: _Star, db: sqlite3.Connection) -> _Drawn:
    found = _event(rng, s, db)
    name, named = _named_row(s.staff, found.staff, "st")
    day = found.day
    month = _month(day)
    question = (
        f"Which {s.person.entity.plural} had {_a(s.event.entity.table)} with the "
        f"{s.staff.entity.table} {name} in {month}?",
        f"List the {s.person.entity.plural} whose {s.event.entity.plural} in {month} were "
        f"with {s.staff.entity.table} {name}.",
    )
    labels = s.person.aliased_label("pe")
    sql = (
        f"SELECT {labels} {_joins(s, 'staff', 'person')} WHERE "
        f"strftime('%Y-%m', e.{found.when.name}) = {quote(day[:7])} AND {named}"
    )
    return question, sql


def _star_distinct(rng: random.Random, s: _Star, db: sqlite3.Connection) -> _Drawn:
    found = _event(rng, s, db)
    name, named = _named_row(s.unit, found.unit, "u")
    words, condition = _person_condition(rng, s, found.person)
    detail = found.detail
    question = (
        f"List the distinct {detail.phrase} values of {s.event.entity.plural} of "
        f"{s.person.entity.plural} {words} at the {s.unit.entity.table} {name}.",
        f"What different {detail.phrase} values do {s.event.entity.plural} at the "
        f"{s.unit.entity.table} {name} have for {s.person.entity.plural} {words}?",
    )
    joined = _joins(s, "unit", "person")
    return question, f"SELECT DISTINCT e.{detail.name} {joined} WHERE {condition} AND {named}"


def _star_person_filter(rng: random.Random, s: _Star, db: sqlite3.Connection) -> _Drawn:
    """A person filter said as people say it ("customers from Oslo"), with a second condition."""
    person = s.person
    row = _row(db, person.entity.table, rng)
    words, condition = _person_condition(rng, s, row)
    last = next(c for c in person.entity.label if c.name == "last_name")
    prefix = row[last.name][: rng.randint(1, 3)]
    question = (
        f'Which {person.entity.plural} {words} have a last name starting with "{prefix}"?',
        f'List the {person.entity.plural} {words} whose last names begin with "{prefix}".',
    )
    labels = ", ".join(c.name for c in person.entity.label)
    sql = (
        f"SELECT {labels} FROM {person.entity.table} WHERE last_name LIKE {quote(prefix + '%')} "
        f"AND {condition.removeprefix('pe.')}"
    )
    return question, sql


# --- extended four-table kinds (``kinds="extended"``) -----------------------------------------
# Shapes the base kinds leave out, which test_unseen's templates ask for: NOT IN and IN through a
# chain of joins, INTERSECT, comparisons with an average (a scalar subquery, in WHERE or HAVING),
# HAVING over a filtered group, a breakdown by a detail, COUNT(DISTINCT), the best month and the
# largest or most common row.


def _star_having_status(rng: random.Random, s: _Star, db: sqlite3.Connection) -> _Drawn:
    found = _event(rng, s, db)
    status, year = found.state, found.year
    staff, events = s.staff, s.event.entity.plural
    grouped = (
        f"{_joins(s, 'staff')} WHERE e.status = {quote(status)} AND {_year_sql(found.when, year)} "
        f"GROUP BY st.{staff.key}"
    )
    more = rng.choice([n for (n,) in db.execute(f"SELECT COUNT(*) {grouped}")]) - 1
    question = (
        f"Which {staff.entity.plural} had more than {more} {status} {events} in {year}?",
        f"List the {staff.entity.plural} with over {more} {events} of status {status} "
        f"in {year}.",
    )
    return question, f"SELECT {staff.aliased_label('st')} {grouped} HAVING COUNT(*) > {more}"


def _star_never(rng: random.Random, s: _Star, db: sqlite3.Connection) -> _Drawn:
    """People with no event in a year: NOT IN a subquery."""
    found = _event(rng, s, db)
    person, event, when = s.person, s.event.entity, found.when.name
    words, condition = _person_condition(rng, s, found.person)
    years = [y for (y,) in db.execute(f"SELECT DISTINCT strftime('%Y', {when}) FROM {event.table}")]
    year = rng.choice(sorted(years))
    question = (
        f"Which {person.entity.plural} {words} never had {_a(event.table)} in {year}?",
        f"List the {person.entity.plural} {words} who had no {event.plural} in {year}.",
    )
    sql = (
        f"SELECT {person.label} FROM {person.entity.table} WHERE "
        f"{condition.removeprefix('pe.')} AND {person.key} NOT IN (SELECT {person.key} FROM "
        f"{event.table} WHERE strftime('%Y', {when}) = {quote(year)})"
    )
    return question, sql


def _star_idle_staff(rng: random.Random, s: _Star, db: sqlite3.Connection) -> _Drawn:
    """Staff of a unit with no event in a month: a join, then NOT IN a subquery."""
    found = _event(rng, s, db)
    staff, unit, event = s.staff, s.unit, s.event.entity
    name, named = _named_row(unit, found.unit, "u")
    day = found.day
    question = (
        f"Which {staff.entity.plural} of the {unit.entity.table} {name} had no "
        f"{event.plural} in {_month(day)}?",
        f"List the {staff.entity.plural} at the {unit.entity.table} {name} without any "
        f"{event.plural} in {_month(day)}.",
    )
    sql = (
        f"SELECT {staff.aliased_label('st')} FROM {staff.entity.table} st JOIN "
        f"{unit.entity.table} u ON st.{unit.key} = u.{unit.key} WHERE {named} AND "
        f"st.{staff.key} NOT IN (SELECT "
        f"{staff.key} FROM {event.table} WHERE strftime('%Y-%m', {found.when.name}) = "
        f"{quote(day[:7])})"
    )
    return question, sql


def _star_in_chain(rng: random.Random, s: _Star, db: sqlite3.Connection) -> _Drawn:
    """People with an event at a unit: IN a subquery that joins events to staff to units."""
    found = _event(rng, s, db)
    person, unit, event = s.person, s.unit, s.event.entity
    words, condition = _person_condition(rng, s, found.person)
    name, named = _named_row(unit, found.unit, "u")
    question = (
        f"List the {person.entity.plural} {words} who have ever had {_a(event.table)} at "
        f"the {unit.entity.table} {name}.",
        f"Which {person.entity.plural} {words} have had {event.plural} at the "
        f"{unit.entity.table} {name}?",
    )
    sql = (
        f"SELECT {person.label} FROM {person.entity.table} WHERE "
        f"{condition.removeprefix('pe.')} AND {person.key} IN (SELECT e.{person.key} "
        f"{_joins(s, 'unit')} WHERE {named})"
    )
    return question, sql


def _star_both(rng: random.Random, s: _Star, db: sqlite3.Connection) -> _Drawn | None:
    """People with events at two named units: INTERSECT of two four-table joins."""
    found = _event(rng, s, db)
    person, unit, event = s.person, s.unit, s.event.entity
    cursor = db.execute(
        f"SELECT * FROM {unit.entity.table} WHERE {unit.key} IN (SELECT st.{unit.key} "
        f"{_joins(s, 'staff')} WHERE e.{person.key} = ?) ORDER BY 1",
        (found.person[person.key],),
    )
    names = [d[0] for d in cursor.description]
    units = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    if len(units) < 2:
        return None
    first, second = (_named_row(unit, row, "u") for row in rng.sample(units, 2))
    words, condition = _person_condition(rng, s, found.person)
    question = (
        f"Which {person.entity.plural} {words} have had {event.plural} at both the "
        f"{unit.entity.table} {first[0]} and the {unit.entity.table} {second[0]}? Give their "
        f"{person.entity.table} ids and names."
    )
    select = f"SELECT pe.{person.key}, {person.aliased_label('pe')} {_joins(s, 'unit', 'person')}"
    sql = (
        f"{select} WHERE {condition} AND {first[1]} INTERSECT {select} WHERE {condition} "
        f"AND {second[1]}"
    )
    return question, sql


def _star_above_average(
    rng: random.Random, s: _Star, db: sqlite3.Connection
) -> _Drawn | None:
    """Staff of a unit paid above the average of all staff: a scalar subquery in WHERE."""
    staff, unit = s.staff, s.unit
    value = next((c for c in staff.columns if c.sql_type == "REAL"), None)
    if value is None:
        return None
    found = _event(rng, s, db)
    name, named = _named_row(unit, found.unit, "u")
    when = next((c for c in staff.columns if c.sql_type == "DATE"), None)
    hired, hired_sql = "", ""
    if when is not None and rng.random() < 0.5:
        year = int(found.staff[when.name][:4]) + 1
        hired, hired_sql = f" {when.phrase} before {year}", f" AND st.{when.name} < '{year}-01-01'"
    question = (
        f"List the {staff.entity.plural} of the {unit.entity.table} {name}{hired} whose "
        f"{value.phrase} is above the average {value.phrase} of all {staff.entity.plural}."
    )
    sql = (
        f"SELECT {staff.aliased_label('st')} FROM {staff.entity.table} st JOIN "
        f"{unit.entity.table} u ON st.{unit.key} = u.{unit.key} WHERE {named}{hired_sql} AND "
        f"st.{value.name} > "
        f"(SELECT AVG({value.name}) FROM {staff.entity.table})"
    )
    return question, sql


def _star_units_above_average(
    rng: random.Random, s: _Star, db: sqlite3.Connection
) -> _Drawn:
    """Units whose events average above all events: a scalar subquery in HAVING."""
    found = _event(rng, s, db)
    unit, event, amount = s.unit, s.event.entity, found.amount
    status = found.state
    if rng.random() < 0.5:
        question = (
            f"Which {unit.entity.plural} have an average {event.table} {amount.phrase} above "
            f"the overall average?"
        )
        where, inner = "", ""
    else:
        question = (
            f"Which {unit.entity.plural} have {status} {event.plural} with an average "
            f"{amount.phrase} above that of all {status} {event.plural}?"
        )
        where, inner = f" WHERE e.status = {quote(status)}", f" WHERE status = {quote(status)}"
    sql = (
        f"SELECT {unit.aliased_label('u')} {_joins(s, 'unit')}{where} GROUP BY u.{unit.key} "
        f"HAVING AVG(e.{amount.name}) > (SELECT AVG({amount.name}) FROM {event.table}{inner})"
    )
    return question, sql


def _star_having_average(rng: random.Random, s: _Star, db: sqlite3.Connection) -> _Drawn:
    """Units whose events of a status average more than a bound: HAVING AVG over a join."""
    found = _event(rng, s, db)
    unit, event, amount = s.unit, s.event.entity, found.amount
    status = found.state
    grouped = f"{_joins(s, 'unit')} WHERE e.status = {quote(status)} GROUP BY u.{unit.key}"
    bound = int(rng.choice([a for (a,) in db.execute(f"SELECT AVG(e.{amount.name}) {grouped}")]))
    question = (
        f"List the {unit.entity.plural} whose {status} {event.plural} average more than "
        f"{bound} in {amount.phrase}."
    )
    sql = f"SELECT {unit.aliased_label('u')} {grouped} HAVING AVG(e.{amount.name}) > {bound}"
    return question, sql


def _star_by_detail(rng: random.Random, s: _Star, db: sqlite3.Connection) -> _Drawn:
    """A total per detail value for the people of a condition in a year."""
    found = _event(rng, s, db)
    words, condition = _person_condition(rng, s, found.person)
    year, amount, detail = found.year, found.amount, found.detail
    question = (
        f"For {s.person.entity.plural} {words}, what was the total {amount.phrase} of "
        f"{s.event.entity.plural} in {year} for each {detail.phrase}?"
    )
    sql = (
        f"SELECT e.{detail.name}, SUM(e.{amount.name}) {_joins(s, 'person')} WHERE {condition} "
        f"AND {_year_sql(found.when, year)} GROUP BY e.{detail.name}"
    )
    return question, sql


def _star_count_distinct(rng: random.Random, s: _Star, db: sqlite3.Connection) -> _Drawn:
    found = _event(rng, s, db)
    words, condition = _person_condition(rng, s, found.person)
    year = found.year
    question = (
        f"How many different {s.staff.entity.plural} did {s.person.entity.plural} {words} "
        f"have {s.event.entity.plural} with in {year}?"
    )
    sql = (
        f"SELECT COUNT(DISTINCT e.{s.staff.key}) {_joins(s, 'person')} WHERE {condition} "
        f"AND {_year_sql(found.when, year)}"
    )
    return question, sql


def _star_best_month(rng: random.Random, s: _Star, db: sqlite3.Connection) -> _Drawn:
    found = _event(rng, s, db)
    event, when, amount = s.event.entity, found.when.name, found.amount
    year = found.year
    if rng.random() < 0.5:
        what, order = f"the highest total {amount.phrase} of {event.plural}", f"SUM({amount.name})"
    else:
        what, order = f"the most {event.plural}", "COUNT(*)"
    question = f"Which month (two-digit number) of {year} had {what}?"
    sql = (
        f"SELECT strftime('%m', {when}) AS month FROM {event.table} WHERE strftime('%Y', {when}) "
        f"= {quote(year)} GROUP BY month ORDER BY {order} DESC, month LIMIT 1"
    )
    return question, sql


def _star_largest(rng: random.Random, s: _Star, db: sqlite3.Connection) -> _Drawn:
    found = _event(rng, s, db)
    event, person = s.event, s.person.entity
    name, named = _named_row(s.person, found.person, "pe")
    question = (
        f"Which {event.entity.table} of the {person.table} {name} had the largest "
        f"{found.amount.phrase}? Give its id."
    )
    sql = (
        f"SELECT e.{event.key} {_joins(s, 'person')} WHERE {named} ORDER BY "
        f"e.{found.amount.name} DESC, e.{event.key} LIMIT 1"
    )
    return question, sql


def _star_most_common(rng: random.Random, s: _Star, db: sqlite3.Connection) -> _Drawn:
    found = _event(rng, s, db)
    unit, detail = s.unit, found.detail
    name, named = _named_row(unit, found.unit, "u")
    question = (
        f"Which {detail.phrase} is the most common among the {s.event.entity.plural} at the "
        f"{unit.entity.table} {name}?"
    )
    sql = (
        f"SELECT e.{detail.name} {_joins(s, 'unit')} WHERE {named} GROUP BY e.{detail.name} "
        f"ORDER BY COUNT(*) DESC, e.{detail.name} LIMIT 1"
    )
    return question, sql


# a kind returns None where this schema has no column it needs (no date column)
_Kind = Callable[[random.Random, _Schema, sqlite3.Connection], "_Drawn | None"]
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
_StarKind = Callable[[random.Random, _Star, sqlite3.Connection], "_Drawn | None"]
_STAR_TEMPLATES: dict[str, _StarKind] = {
    "star_count": _star_count,
    "star_aggregate": _star_aggregate,
    "star_having": _star_having,
    "star_breakdown": _star_breakdown,
    "star_bridge": _star_bridge,
    "star_distinct": _star_distinct,
    "star_person_filter": _star_person_filter,
}
STAR_KINDS: tuple[str, ...] = tuple(_STAR_TEMPLATES)
_EXTENDED_TEMPLATES: dict[str, _StarKind] = {
    "star_having_status": _star_having_status,
    "star_never": _star_never,
    "star_idle_staff": _star_idle_staff,
    "star_in_chain": _star_in_chain,
    "star_both": _star_both,
    "star_above_average": _star_above_average,
    "star_units_above_average": _star_units_above_average,
    "star_having_average": _star_having_average,
    "star_by_detail": _star_by_detail,
    "star_count_distinct": _star_count_distinct,
    "star_best_month": _star_best_month,
    "star_largest": _star_largest,
    "star_most_common": _star_most_common,
}
EXTENDED_KINDS: tuple[str, ...] = tuple(_EXTENDED_TEMPLATES)
KIND_SETS = ("base", "extended")


def _draw_task(
    kind: str, rng: random.Random, schema: _Schema | _Star, db: sqlite3.Connection
) -> tuple[str, str] | None:
    if kind in _STAR_TEMPLATES:
        drawn = _STAR_TEMPLATES[kind](rng, schema, db)
    elif kind in _EXTENDED_TEMPLATES:
        drawn = _EXTENDED_TEMPLATES[kind](rng, schema, db)
    else:
        if isinstance(schema, _Star):  # a two-table kind on one parent/child pair of the four
            schema = rng.choice(schema.pairs)
        drawn = _TEMPLATES[kind](rng, schema, db)
    if drawn is None:
        return None
    question, sql = drawn
    # a kind gives its phrasings and draws one last: the question is a kind's last draw
    return (question if isinstance(question, str) else rng.choice(question)), sql


def _draw_kinds(
    kinds: tuple[str, ...],
    count: int,
    rng: random.Random,
    schema: _Schema | _Star,
    connection: sqlite3.Connection,
    seen: set[str],
) -> list[tuple[str, str, str]]:
    """Up to ``count`` (kind, question, gold sql) of ``kinds`` in turn, each with an answer and
    a question not in ``seen`` (which it extends)."""
    drawn_tasks: list[tuple[str, str, str]] = []
    for draw in range(_MAX_DRAWS):
        if len(drawn_tasks) >= count:
            break
        kind = kinds[draw % len(kinds)]  # every kind in turn
        drawn = _draw_task(kind, rng, schema, connection)
        if drawn is None:
            continue
        question, sql = drawn
        if question in seen or not has_answer(connection, sql):
            continue
        seen.add(question)
        drawn_tasks.append((kind, question, sql))
    return drawn_tasks


@functools.lru_cache(maxsize=4)
def _tasks(databases: int, tables: int, kind_set: str, cache: str) -> tuple[SQLTask, ...]:
    del cache  # part of the lru key only
    kinds = TEMPLATE_KINDS if tables == 2 else TEMPLATE_KINDS + STAR_KINDS
    per_database = _TASKS_PER_DATABASE if tables == 2 else 2 * len(kinds)
    tasks: list[SQLTask] = []
    for index in range(databases):
        path = synthetic_db(index, tables)
        schema = _schema(index, tables)
        db_id = _db_id(index, tables)
        seed = "" if tables == 2 else f"t{tables}-"
        rng = random.Random(f"boltzoo-sql-synthetic-{seed}tasks-{index}-v{SYNTHETIC_VERSION}")
        connection = connect_read_only(path)
        seen: set[str] = set()
        try:
            drawn = _draw_kinds(kinds, per_database, rng, schema, connection, seen)
            if kind_set == "extended":  # after the base tasks, from a generator of its own, so
                # that the base tasks stay those of kinds="base"
                rng = random.Random(f"boltzoo-sql-synthetic-{seed}extended-{index}")
                count = 2 * len(EXTENDED_KINDS)
                drawn += _draw_kinds(EXTENDED_KINDS, count, rng, schema, connection, seen)
        finally:
            connection.close()
        for kind, question, sql in drawn:
            hashed = f"{db_id}\n{question}"  # as the generated tasks' ids are made
            task_id = f"{db_id}-{short_digest(hashed)}"
            tasks.append(
                SQLTask(task_id, question, sql, db_id, str(path), f"synthetic/{kind}", "train")
            )
    return tuple(tasks)


def synthetic_tasks(databases: int, tables: int = 2, kinds: str = "base") -> list[SQLTask]:
    """Return the train tasks of synthetic databases ``0 .. databases - 1`` with ``tables``
    tables: 2 (28 tasks each, two of every two-table kind) or 4 (42 each: the two-table kinds
    on the pairs inside, and the four-table kinds), every kind in turn. ``kinds="extended"``
    (four tables only) adds two tasks of each of :data:`EXTENDED_KINDS` to every database
    (68 each), after the base tasks, which stay the same. Builds the databases that are not
    cached yet."""
    if databases < 0:
        raise ValueError(f"databases must be 0 or more, got {databases}")
    if tables not in TABLE_COUNTS:
        raise ValueError(f"tables must be one of {TABLE_COUNTS}, got {tables}")
    if kinds not in KIND_SETS:
        raise ValueError(f"kinds must be one of {KIND_SETS}, got {kinds!r}")
    if kinds == "extended" and tables != 4:
        raise ValueError("kinds='extended' needs tables=4 (its kinds join all four tables)")
    return list(_tasks(int(databases), int(tables), kinds, str(cache_dir("sql"))))
