"""Reading users' data files: existence checks, JSON and JSONL rows with their line numbers,
required fields — with errors that name the file and the line.

Also the bundled tables (``boltzoo/envs/data/tables``: the value lists, phrasings and schemas
the task generators draw from, as JSON and SQL) and the small pieces the data modules share
around their rows: checking a split (or level, or
database) name against its choices, and the sha256 of a text that gives generated tasks their
ids and their train/test split.

Every malformed file or bad name raises :class:`~boltzoo.errors.DatasetError` (a ``ValueError``);
a missing file raises ``FileNotFoundError``. Messages start with ``"{file}, line {n}: "`` (or the
``where`` a caller passes) so a user can go straight to the broken row.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from boltzoo.errors import DatasetError

__all__ = [
    "bundled_table",
    "bundled_text",
    "check_choice",
    "existing_file",
    "hash_split",
    "jsonl_rows",
    "located_rows",
    "read_json_list",
    "required_text",
    "short_digest",
    "split_source",
]


_TABLES_DIR = Path(__file__).parent / "tables"


def bundled_text(name: str) -> str:
    """Return the text of ``boltzoo/envs/data/tables/<name>`` (e.g. a schema, ``"retail.sql"``)."""
    return (_TABLES_DIR / name).read_text(encoding="utf-8")


def _as_tuples(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_as_tuples(item) for item in value)
    if isinstance(value, dict):
        return {key: _as_tuples(item) for key, item in value.items()}
    return value


def bundled_table(name: str) -> dict[str, Any]:
    """Return the JSON object in ``boltzoo/envs/data/tables/<name>``, its arrays as tuples.

    Tuples, because the generators hash, compare and index these rows as the literals they were
    written as before they were data; a generator draws the same tasks either way.
    """
    return _as_tuples(json.loads(bundled_text(name)))


def existing_file(path: str | os.PathLike, kind: str) -> Path:
    """Return ``path`` as a :class:`~pathlib.Path`, after checking that it is a file.

    Args:
        path (str | os.PathLike): The file a user passed.
        kind (str): What the file is, for the message (``"GSM8K"``, ``"Spider schema"``).

    Raises:
        FileNotFoundError: ``"{kind} file not found: {path}"`` when it is missing or a folder.
    """
    file_path = Path(path)
    if not file_path.is_file():
        raise FileNotFoundError(f"{kind} file not found: {file_path}")
    return file_path


def jsonl_rows(path: str | os.PathLike) -> Iterator[tuple[int, int, dict]]:
    """Yield ``(line number, row index, row)`` for each non-blank line of a jsonl file.

    Args:
        path (str | os.PathLike): An existing file (see :func:`existing_file`), read as UTF-8.

    Yields:
        tuple[int, int, dict]: The 1-based line number, the 0-based index among the rows (blank
        lines are skipped and not counted), and the row's JSON object.

    Raises:
        DatasetError: ``"{file}, line {n}: bad JSON (...)"`` or ``"...: expected a JSON
            object"`` for a line that is not a JSON object.
    """
    file_path = Path(path)
    row_index = 0
    with file_path.open(encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{file_path}, line {line_number}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise DatasetError(f"{where}: bad JSON ({error.msg})") from error
            if not isinstance(row, dict):
                raise DatasetError(f"{where}: expected a JSON object")
            yield line_number, row_index, row
            row_index += 1


def read_json_list(path: str | os.PathLike) -> list:
    """Return the JSON array a whole file holds (its items unchecked).

    Args:
        path (str | os.PathLike): An existing file (see :func:`existing_file`), read as UTF-8.

    Raises:
        DatasetError: ``"{file}, line {n}: bad JSON (...)"``, or ``"{file}: expected a JSON
            list"`` when the file holds another JSON value.
    """
    file_path = Path(path)
    try:
        data = json.loads(file_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise DatasetError(f"{file_path}, line {error.lineno}: bad JSON ({error.msg})") from error
    if not isinstance(data, list):
        raise DatasetError(f"{file_path}: expected a JSON list")
    return data


def required_text(row: dict, field: str, where: str, *, allow_empty: bool = False) -> str:
    """Return ``row[field]``, which must be a string (with some non-space text).

    Args:
        row (dict): One row of a data file.
        field (str): The key to read.
        where (str): Where the row is, to start the message (``"data.jsonl, line 3"``).
        allow_empty (bool): Accept ``""`` and blank strings too (still only strings).

    Raises:
        DatasetError: ``"{where}: missing field 'x'"`` or ``"{where}: field 'x' must be a
            non-empty string"``.
    """
    if field not in row:
        raise DatasetError(f"{where}: missing field {field!r}")
    value = row[field]
    if not isinstance(value, str) or (not allow_empty and not value.strip()):
        raise DatasetError(f"{where}: field {field!r} must be a non-empty string")
    return value


def check_choice(what: str, value: object, choices: Iterable[str]) -> None:
    """Return None if ``value`` is one of ``choices``; raise DatasetError naming them if not.

    Args:
        what (str): What the value names, for the message (``"split"``, ``"Spider split"``).
        value (object): The name a user passed.
        choices (Iterable[str]): The valid names, in the order the message lists them.

    Raises:
        DatasetError: ``"unknown {what} 'x'; choose one of: a, b, c"``.
    """
    choices = tuple(choices)
    if value not in choices:
        raise DatasetError(f"unknown {what} {value!r}; choose one of: {', '.join(choices)}")


def _sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def short_digest(text: str, length: int = 8) -> str:
    """Return the first ``length`` hex digits of sha256(``text`` as UTF-8), for task ids.

    Args:
        text (str): What the id stands for (a question, or a database id and a question).
        length (int): How many of the 64 lowercase hex digits to keep.
    """
    return _sha256_hex(text)[:length]


def hash_split(text: str, *, test: int, out_of: int) -> str:
    """Return ``"test"`` for about ``test`` texts in ``out_of``, else ``"train"``.

    A text is in test when sha256(``text`` as UTF-8), read as an integer, ``% out_of < test``:
    the split depends on the text alone, never on the order tasks were drawn in.

    Args:
        text (str): The text that decides (a question, or a database id and a question).
        test (int): How many of the ``out_of`` residues go to test (``1`` of ``10``, ``15`` of
            ``100``).
        out_of (int): The modulus.
    """
    return "test" if int(_sha256_hex(text), 16) % out_of < test else "train"


def split_source(source: Any, split: str | None, what: str) -> Any:
    """Return the part of a user's data ``source`` that holds ``split``.

    Splits are explicit: a ``{split: source}`` mapping holds the splits it names; a single
    source (one file, one list of rows) is the ``"train"`` split and nothing else, so that an
    evaluation asking for ``"test"`` can never play the training rows.

    Args:
        source (Any): A file path, a list of rows, or a ``{split: file or rows}`` mapping.
        split (str | None): The split asked for (None: ``"train"``).
        what (str): What the data is, for the message (``"math-v0 path="``).

    Raises:
        DatasetError: The split is not in the mapping, or a single source is asked for another
            split than ``"train"`` (the message says how to name a file's split).
    """
    split = split or "train"
    if isinstance(source, Mapping):
        if split not in source:
            raise DatasetError(
                f"{what}: no split {split!r} (it has {', '.join(map(repr, source))})"
            )
        return source[split]
    if split != "train":
        raise DatasetError(
            f"{what}: split {split!r} asked for, but one file or list of rows is the 'train' "
            f"split only (never played as {split!r}); name each file's split: "
            f"{{'train': ..., {split!r}: ...}}"
        )
    return source


def located_rows(source: Any, what: str) -> list[tuple[str, dict]]:
    """Return ``(where, row)`` for each row of a JSONL file, a JSON-list file or a list of dicts.

    Args:
        source (Any): A path (``.jsonl``: a JSON object a line; else a JSON list) or a sequence.
        what (str): What the rows are, for messages (``"TaskEnv tasks"``).

    Raises:
        FileNotFoundError: The file is missing.
        DatasetError: A row is not a JSON object, or ``source`` is neither a file nor a list.
    """
    if isinstance(source, str | os.PathLike):
        path = existing_file(source, what)
        status = path.stat()
        # every env instance of a rollout reads the file: parse it once while it is unchanged
        located = [
            (where, dict(row) if isinstance(row, dict) else row)
            for where, row in _file_rows(str(path.resolve()), status.st_mtime_ns, status.st_size)
        ]
    elif isinstance(source, Sequence) and not isinstance(source, str | bytes):
        located = [(f"rows[{i}]", row) for i, row in enumerate(source)]
    else:
        raise DatasetError(
            f"{what}: expected a JSONL file, a JSON-list file or a list of rows, got "
            f"{type(source).__name__}"
        )
    for where, row in located:
        if not isinstance(row, dict):
            raise DatasetError(f"{where}: a row is a JSON object, got {type(row).__name__}")
    return located


@functools.lru_cache(maxsize=16)
def _file_rows(path: str, mtime_ns: int, size: int) -> tuple[tuple[str, Any], ...]:
    """Return ``(where, row)`` of a rows file, cached by its path, time and size."""
    if path.endswith(".jsonl"):
        return tuple((f"{path}, line {line}", row) for line, _, row in jsonl_rows(path))
    return tuple((f"{path}, row {i}", row) for i, row in enumerate(read_json_list(path)))
