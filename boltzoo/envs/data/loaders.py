"""Loaders of tasks into the env that plays them: rows of your own (every env's ``tasks=``:
:func:`math_rows`, :func:`sql_rows`, :func:`rag_rows`, with :func:`load_corpus` for rag-v0's
passages) and public formats: GSM8K and Calc-X jsonl (math-v0), MuSiQue and HotpotQA (rag-v0)
and Spider directories (sql-v0). Errors name the file and the line, or the row (see
:mod:`.files`)."""

from __future__ import annotations

import math
import os
import re
import sqlite3
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

from boltzoo.envs.data.files import (
    check_choice,
    existing_file,
    jsonl_rows,
    located_rows,
    read_json_list,
    required_text,
    short_digest,
)
from boltzoo.envs.data.math_tasks import (
    MathTask,
    canonical_number,
    exact_value,
    normalise_expression,
    parse_number,
)
from boltzoo.envs.data.rag_tasks import Passage, RAGDataset, RAGTask
from boltzoo.envs.data.sql_common import SQLTask, connect_read_only
from boltzoo.envs.data.sql_tasks import DATABASES, database_path
from boltzoo.errors import DatasetError

__all__ = [
    "SPIDER_SPLITS",
    "load_calcx",
    "load_corpus",
    "load_gsm8k",
    "load_hotpotqa",
    "load_musique",
    "load_spider",
    "math_rows",
    "rag_rows",
    "sql_rows",
]

SPIDER_SPLITS = {"dev": "dev.json", "train": "train_spider.json"}

# --- GSM8K and Calc-X (math-v0) ----------------------------------------------------------------


def _expression_if_exact(candidate: str | None, answer: Fraction) -> str | None:
    """Keep a file's expression only when it evaluates exactly to the gold answer."""
    if candidate is None:
        return None
    expression = normalise_expression(candidate)
    if expression is None or exact_value(expression) != answer:
        return None
    return expression


def _file_task(task_id: str, question: str, answer: Fraction, expression: str | None) -> MathTask:
    """A math-v0 task read from a user's data (GSM8K, Calc-X or rows)."""
    return MathTask(
        task_id, question.strip(), canonical_number(answer), expression, level="file", template=None
    )


_GSM8K_FINAL_RE = re.compile(r"####\s*([^\n]*)")
_GSM8K_CALC_RE = re.compile(r"<<([^<>=]*)=[^<>]*>>")


def load_gsm8k(path: str | os.PathLike) -> list[MathTask]:
    """Load GSM8K jsonl rows ``{"question", "answer": "...<<48/2=24>>...\\n#### 72"}``.

    ``answer`` becomes the canonical number after the last ``####`` (commas dropped);
    ``expression`` is the last ``<<EXPR=...>>`` annotation's left side when it evaluates to
    that answer, else None. Ids: the row's ``id`` or ``"gsm8k-{row index}"``. Blank lines are
    skipped; rows keep file order.

    Raises:
        FileNotFoundError: the file does not exist (message has the path).
        DatasetError: bad JSON, a missing field or an answer without ``#### N`` (message has
            the file and 1-based line number).
    """
    file_path = existing_file(path, "GSM8K")
    tasks = []
    for line_number, row_index, row in jsonl_rows(file_path):
        where = f"{file_path}, line {line_number}"
        question = required_text(row, "question", where)
        solution = required_text(row, "answer", where)
        finals = _GSM8K_FINAL_RE.findall(solution)
        if not finals:
            raise DatasetError(f"{where}: answer has no final '#### N' line")
        try:
            answer = parse_number(finals[-1])
        except ValueError as error:
            raise DatasetError(f"{where}: '#### {finals[-1].strip()}' is not a number") from error
        annotations = _GSM8K_CALC_RE.findall(solution)
        task_id = str(row["id"]) if row.get("id") is not None else f"gsm8k-{row_index}"
        expression = _expression_if_exact(annotations[-1] if annotations else None, answer)
        tasks.append(_file_task(task_id, question, answer, expression))
    return tasks


_GADGET_RE = re.compile(r"<gadget\s+id=[\"']calculator[\"']\s*>(.*?)</gadget>", re.DOTALL)


def _number_field(row: dict, field: str, where: str) -> Fraction:
    if field not in row:
        raise DatasetError(f"{where}: missing field {field!r}")
    value = row[field]
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise DatasetError(f"{where}: field {field!r} must be a number or a numeric string")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise DatasetError(f"{where}: field {field!r} is not finite")
        return Fraction(repr(value))  # the written decimal, not the binary float
    try:
        return parse_number(str(value))
    except ValueError as error:
        raise DatasetError(f"{where}: {field} {value!r} is not a number") from error


def load_calcx(path: str | os.PathLike) -> list[MathTask]:
    """Load Calc-X jsonl rows (e.g. Calc-gsm8k, Calc-ape210k releases).

    Rows have ``question``, ``result`` (string or number: ``"3_600"``, ``"12.5"``, ``"1/2"``),
    optional ``id`` and optional ``chain`` with ``<gadget id="calculator">EXPR</gadget>``.
    ``answer`` is the canonical result (fractions stay ``"a/b"`` only when non-terminating);
    ``expression`` is the last gadget's expression, normalised to plain arithmetic, when it
    evaluates exactly to the result, else None. Ids: the row's ``id`` or ``"calcx-{i}"``.

    Raises:
        FileNotFoundError: the file does not exist (message has the path).
        DatasetError: bad JSON, a missing field or a non-numeric result (message has the file
            and 1-based line number).
    """
    file_path = existing_file(path, "Calc-X")
    tasks = []
    for line_number, row_index, row in jsonl_rows(file_path):
        where = f"{file_path}, line {line_number}"
        question = required_text(row, "question", where)
        answer = _number_field(row, "result", where)
        chain = row.get("chain")
        if chain is not None and not isinstance(chain, str):
            raise DatasetError(f"{where}: field 'chain' must be a string")
        gadgets = _GADGET_RE.findall(chain or "")
        task_id = str(row["id"]) if row.get("id") is not None else f"calcx-{row_index}"
        expression = _expression_if_exact(gadgets[-1] if gadgets else None, answer)
        tasks.append(_file_task(task_id, question, answer, expression))
    return tasks


# --- MuSiQue, HotpotQA and corpora (rag-v0) ----------------------------------------------------


def _row_id(row: dict, keys: tuple[str, ...], fallback: str, where: str) -> str:
    for key in keys:
        value = row.get(key)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, (str, int)) or str(value) == "":
                raise DatasetError(f"{where}: field {key!r} must be a string or an integer")
            return str(value)
    return fallback


def _aliases(row: dict, answer: str, where: str, field: str = "answer_aliases") -> tuple[str, ...]:
    raw = row.get(field) or []
    if not isinstance(raw, list) or not all(isinstance(alias, str) for alias in raw):
        raise DatasetError(f"{where}: field {field!r} must be a list of strings")
    aliases: list[str] = []
    for alias in raw:
        if alias.strip() and alias != answer and alias not in aliases:
            aliases.append(alias)
    return tuple(aliases)


class _CorpusCollector:
    """Per-question corpora (corpus_id = task_id) or one shared, deduplicated corpus."""

    def __init__(self, shared_id: str | None) -> None:
        self.shared_id = shared_id
        self.corpora: dict[str, list[Passage]] = {}
        self.shared_index: dict[tuple[str, str], str] = {}
        if shared_id is not None:
            self.corpora[shared_id] = []

    def add(
        self, task_id: str, paragraphs: list[tuple[str, str, str]], where: str
    ) -> tuple[str, dict[str, str]]:
        """Store (local key, title, text) paragraphs; return the corpus id and key -> id."""
        ids: dict[str, str] = {}
        if self.shared_id is None:
            if task_id in self.corpora:
                raise DatasetError(f"{where}: duplicate id {task_id!r}")
            passages = []
            for key, title, text in paragraphs:
                passage_id = f"{task_id}-{key}"
                ids[key] = passage_id
                passages.append(Passage(passage_id, title, text))
            self.corpora[task_id] = passages
            return task_id, ids
        shared = self.corpora[self.shared_id]
        for key, title, text in paragraphs:
            passage_id = self.shared_index.get((title, text))
            if passage_id is None:
                passage_id = f"{self.shared_id}-{len(shared)}"
                self.shared_index[title, text] = passage_id
                shared.append(Passage(passage_id, title, text))
            ids[key] = passage_id
        return self.shared_id, ids


def _ordered_unique(items: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def load_musique(path: str | os.PathLike, *, shared_corpus: bool = False) -> RAGDataset:
    """Load MuSiQue jsonl rows (``musique_ans_v1.0_dev.jsonl`` and the like).

    Rows have ``id``, ``question``, ``answer``, optional ``answer_aliases`` (list), optional
    ``answerable`` (kept rows either way) and ``paragraphs`` (``idx``, ``title``,
    ``paragraph_text``, ``is_supporting``). Passages keep title and text verbatim.
    ``supporting_ids`` are the ``is_supporting`` paragraphs, in hop order when the row's
    ``question_decomposition`` gives ``paragraph_support_idx`` (else in paragraph order);
    ``hops`` is their count.

    Args:
        path: The jsonl file.
        shared_corpus: False (default): each question's paragraphs form its own corpus
            (corpus_id = task_id, passage ids ``"{task_id}-{idx}"``). True: all paragraphs of
            the file form one corpus ``"musique-shared"``, deduplicated by (title, text).

    Raises:
        FileNotFoundError: the file does not exist (message has the path).
        DatasetError: bad JSON or a malformed row (message has the file and line number).
    """
    file_path = existing_file(path, "MuSiQue")
    collector = _CorpusCollector("musique-shared" if shared_corpus else None)
    tasks: list[RAGTask] = []
    for line_number, row_index, row in jsonl_rows(file_path):
        where = f"{file_path}, line {line_number}"
        task_id = _row_id(row, ("id",), f"musique-{row_index}", where)
        question = required_text(row, "question", where)
        answer = required_text(row, "answer", where)
        raw_paragraphs = row.get("paragraphs")
        if not isinstance(raw_paragraphs, list) or not raw_paragraphs:
            raise DatasetError(f"{where}: field 'paragraphs' must be a non-empty list")
        paragraphs: list[tuple[str, str, str]] = []
        supporting: list[str] = []
        for position, paragraph in enumerate(raw_paragraphs):
            at = f"{where}, paragraph {position}"
            if not isinstance(paragraph, dict):
                raise DatasetError(f"{at}: expected a JSON object")
            idx = paragraph.get("idx", position)
            if isinstance(idx, bool) or not isinstance(idx, int):
                raise DatasetError(f"{at}: field 'idx' must be an integer")
            key = str(idx)
            if any(key == existing for existing, _, _ in paragraphs):
                raise DatasetError(f"{at}: duplicate idx {idx}")
            title = required_text(paragraph, "title", at, allow_empty=True)
            text = required_text(paragraph, "paragraph_text", at)
            is_supporting = paragraph.get("is_supporting", False)
            if not isinstance(is_supporting, bool):
                raise DatasetError(f"{at}: field 'is_supporting' must be true or false")
            paragraphs.append((key, title, text))
            if is_supporting:
                supporting.append(key)
        hop_order: list[str] = []
        decomposition = row.get("question_decomposition")
        if isinstance(decomposition, list):
            for step in decomposition:
                support = step.get("paragraph_support_idx") if isinstance(step, dict) else None
                if isinstance(support, int) and str(support) in supporting:
                    hop_order.append(str(support))
        keys = _ordered_unique(hop_order + supporting)
        corpus_id, ids = collector.add(task_id, paragraphs, where)
        support_ids = _ordered_unique([ids[key] for key in keys])
        tasks.append(
            RAGTask(
                task_id=task_id,
                question=question,
                answer=answer,
                aliases=_aliases(row, answer, where),
                supporting_ids=support_ids,
                hops=len(support_ids),
                corpus_id=corpus_id,
                template=None,
            )
        )
    return RAGDataset(tasks=tasks, corpora=collector.corpora)


def _hotpot_rows(file_path: Path) -> Iterator[tuple[str, int, dict]]:
    """Rows of a HotpotQA JSON array (``row N``, 1-based) or of a jsonl file (``line N``)."""
    with file_path.open(encoding="utf-8") as handle:
        head = handle.read(4096).lstrip()
    if not head.startswith("["):
        for line_number, row_index, row in jsonl_rows(file_path):
            yield f"{file_path}, line {line_number}", row_index, row
        return
    for row_index, row in enumerate(read_json_list(file_path)):
        where = f"{file_path}, row {row_index + 1}"
        if not isinstance(row, dict):
            raise DatasetError(f"{where}: expected a JSON object")
        yield where, row_index, row


def _hotpot_context(row: dict, where: str) -> list[tuple[str, list[str]]]:
    context = row.get("context")
    if isinstance(context, dict):  # the Hugging Face layout: {"title": [...], "sentences": [...]}
        titles, sentences = context.get("title"), context.get("sentences")
        if not isinstance(titles, list) or not isinstance(sentences, list):
            raise DatasetError(f"{where}: field 'context' needs 'title' and 'sentences' lists")
        context = [list(pair) for pair in zip(titles, sentences, strict=False)]
    if not isinstance(context, list) or not context:
        raise DatasetError(f"{where}: field 'context' must be a non-empty list")
    entries = []
    for position, entry in enumerate(context):
        at = f"{where}, context {position}"
        if (
            not isinstance(entry, list)
            or len(entry) != 2
            or not isinstance(entry[0], str)
            or not isinstance(entry[1], list)
            or not all(isinstance(sentence, str) for sentence in entry[1])
        ):
            raise DatasetError(f"{at}: expected [title, [sentence, ...]]")
        entries.append((entry[0], entry[1]))
    return entries


def _hotpot_support(row: dict, where: str) -> list[str]:
    facts = row.get("supporting_facts", [])
    if isinstance(facts, dict):  # the Hugging Face layout: {"title": [...], "sent_id": [...]}
        facts = [[title, 0] for title in facts.get("title", [])]
    if not isinstance(facts, list):
        raise DatasetError(f"{where}: field 'supporting_facts' must be a list")
    titles = []
    for fact in facts:
        if not isinstance(fact, list) or not fact or not isinstance(fact[0], str):
            raise DatasetError(f"{where}: supporting fact {fact!r} is not [title, sentence index]")
        titles.append(fact[0])
    return titles


def load_hotpotqa(path: str | os.PathLike, *, shared_corpus: bool = False) -> RAGDataset:
    """Load HotpotQA rows from a JSON array (the official files) or a jsonl file.

    Rows have ``_id`` (or ``id``), ``question``, ``answer``, ``context`` (``[[title,
    [sentence, ...]], ...]``) and ``supporting_facts`` (``[[title, sentence index], ...]``);
    the Hugging Face column layout of ``context`` / ``supporting_facts`` is read too. A
    passage is one context entry: its title, and its sentences joined with ``""`` (HotpotQA
    sentences carry their own leading spaces). ``supporting_ids`` are the passages of the
    supporting titles, in order of first mention; ``hops`` is their count; no aliases.

    Args:
        path: The JSON (or jsonl) file.
        shared_corpus: False (default): each question's context is its own corpus
            (corpus_id = task_id, passage ids ``"{task_id}-{position}"``). True: one corpus
            ``"hotpotqa-shared"`` of all passages, deduplicated by (title, text).

    Raises:
        FileNotFoundError: the file does not exist (message has the path).
        DatasetError: bad JSON or a malformed row (message has the file and the 1-based row of
            the array, or the line of a jsonl file), including a supporting title that is not
            in the row's context.
    """
    file_path = existing_file(path, "HotpotQA")
    collector = _CorpusCollector("hotpotqa-shared" if shared_corpus else None)
    tasks: list[RAGTask] = []
    for where, row_index, row in _hotpot_rows(file_path):
        task_id = _row_id(row, ("_id", "id"), f"hotpotqa-{row_index}", where)
        question = required_text(row, "question", where)
        answer = required_text(row, "answer", where)
        context = _hotpot_context(row, where)
        paragraphs = [
            (str(position), title, "".join(sentences))
            for position, (title, sentences) in enumerate(context)
        ]
        key_of_title: dict[str, str] = {}
        for key, title, _ in paragraphs:
            key_of_title.setdefault(title, key)
        support_titles = _ordered_unique(_hotpot_support(row, where))
        missing = [title for title in support_titles if title not in key_of_title]
        if missing:
            raise DatasetError(f"{where}: supporting title {missing[0]!r} is not in the context")
        corpus_id, ids = collector.add(task_id, paragraphs, where)
        support_ids = _ordered_unique([ids[key_of_title[title]] for title in support_titles])
        tasks.append(
            RAGTask(
                task_id=task_id,
                question=question,
                answer=answer,
                aliases=(),
                supporting_ids=support_ids,
                hops=len(support_ids),
                corpus_id=corpus_id,
                template=None,
            )
        )
    return RAGDataset(tasks=tasks, corpora=collector.corpora)


def load_corpus(source: Any) -> list[Passage]:
    """Load a user corpus: rows ``{"id", "title", "text"}`` (``title`` may be absent) from a
    JSONL file, a JSON-list file or a list of dicts.

    Ids may be strings or integers (kept as strings) and must be unique; text is verbatim.

    Raises:
        FileNotFoundError: the file does not exist (message has the path).
        DatasetError: bad JSON, a missing id/text or a repeated id (message has the file and
            line number, or the row).
    """
    passages: list[Passage] = []
    seen: set[str] = set()
    for where, row in located_rows(source, "corpus"):
        if row.get("id") is None:
            raise DatasetError(f"{where}: missing field 'id'")
        passage_id = _unique_id(_row_id(row, ("id",), "", where), seen, where)
        title = required_text(row, "title", where, allow_empty=True) if "title" in row else ""
        passages.append(Passage(passage_id, title, required_text(row, "text", where)))
    return passages


# --- Spider (sql-v0) ---------------------------------------------------------------------------


def load_spider(path: str | os.PathLike, split: str = "dev") -> list[SQLTask]:
    """Load a Spider-format directory.

    Reads ``tables.json`` (the schemas; every row's ``db_id`` must be listed there), the split
    file (``dev.json`` for ``"dev"``, ``train_spider.json`` for ``"train"``; rows with
    ``db_id``, ``question`` and ``query``) and points each task at
    ``database/<db_id>/<db_id>.sqlite``. Rows keep file order; ids are ``spider-{split}-{i}``.

    Raises:
        DatasetError: an unknown split (the message lists the valid ones), bad JSON, or a
            malformed row (the message has the file and 0-based row index).
        FileNotFoundError: a missing ``tables.json``, split file or database file (the message
            has the path).
    """
    check_choice("Spider split", split, SPIDER_SPLITS)
    root = Path(path)
    tables_path = root / "tables.json"
    rows_path = root / SPIDER_SPLITS[split]
    schemas = read_json_list(existing_file(tables_path, "Spider schema"))
    db_ids: set[str] = set()
    for index, schema in enumerate(schemas):
        if not isinstance(schema, dict):
            raise DatasetError(f"{tables_path}, row {index}: expected a JSON object")
        db_ids.add(required_text(schema, "db_id", f"{tables_path}, row {index}"))
    rows = read_json_list(existing_file(rows_path, f"Spider {split}"))
    databases: dict[str, str] = {}
    tasks = []
    for index, row in enumerate(rows):
        where = f"{rows_path}, row {index}"
        if not isinstance(row, dict):
            raise DatasetError(f"{where}: expected a JSON object")
        db_id = required_text(row, "db_id", where)
        question = required_text(row, "question", where)
        query = required_text(row, "query", where)
        if db_id not in db_ids:
            raise DatasetError(f"{where}: db_id {db_id!r} is not described in {tables_path}")
        if db_id not in databases:
            if Path(db_id).name != db_id or db_id in (".", ".."):
                raise DatasetError(f"{where}: db_id {db_id!r} is not a plain name")
            database = root / "database" / db_id / f"{db_id}.sqlite"
            if not database.is_file():
                raise FileNotFoundError(
                    f"Spider database for db_id {db_id!r} not found: {database}"
                )
            databases[db_id] = str(database.resolve())
        tasks.append(
            SQLTask(
                task_id=f"spider-{split}-{index}",
                question=question.strip(),
                gold_sql=query.strip(),
                db_id=db_id,
                database=databases[db_id],
                template=None,
                split=split,
            )
        )
    return tasks


# --- Rows of your own (every env's tasks=) ------------------------------------------------------
# ``source`` is one split's rows: a list of dicts, a JSONL file or a JSON-list file (the env picks
# the split first, with files.split_source). Ids: the row's ``id``, else one from its content.


def _unique_id(task_id: str, seen: set[str], where: str) -> str:
    if task_id in seen:
        raise DatasetError(f"{where}: the id {task_id!r} is used twice")
    seen.add(task_id)
    return task_id


def math_rows(source: Any) -> list[MathTask]:
    """Return math-v0 tasks from rows ``{"question", "answer"}`` (optional ``id``, ``expression``).

    ``answer`` is a number or a numeric string (``12.5``, ``"3/4"``, ``"1,200"``). ``expression``,
    a calculator expression that the oracle's demonstrations use, must evaluate exactly to it.

    Raises:
        DatasetError: a missing or malformed field, an expression that does not give the answer,
            or an id used twice (the message names the file and line, or the row).
    """
    tasks, seen = [], set()
    for where, row in located_rows(source, "math-v0 tasks"):
        question = required_text(row, "question", where).strip()
        answer = _number_field(row, "answer", where)
        given = row.get("expression")
        if given is not None and not isinstance(given, str):
            raise DatasetError(f"{where}: field 'expression' must be a string")
        expression = _expression_if_exact(given, answer)
        if given is not None and expression is None:
            raise DatasetError(
                f"{where}: expression {given!r} does not evaluate exactly to the answer "
                f"{canonical_number(answer)}"
            )
        task_id = _row_id(row, ("id",), f"task-{short_digest(question)}", where)
        tasks.append(_file_task(_unique_id(task_id, seen, where), question, answer, expression))
    return tasks


def sql_rows(source: Any, split: str = "train") -> list[SQLTask]:
    """Return sql-v0 tasks from rows ``{"question", "query", "database"}`` (optional ``id``).

    ``query`` is the gold SQLite query (its result is the answer); it must compile against its
    database. ``database`` is a SQLite file (a relative path is read from the rows file's folder,
    or the working directory for a list of rows) or a bundled database's name (``chinook``,
    ``university``, ``retail``, ``hospital``).

    Raises:
        DatasetError: a missing field, a database that is not a file, a gold query that does not
            compile, or an id used twice (the message names the row).
    """
    base = Path(source).parent if isinstance(source, str | os.PathLike) else Path.cwd()
    tasks, seen, connections = [], set(), {}
    try:
        for where, row in located_rows(source, "sql-v0 tasks"):
            question = required_text(row, "question", where).strip()
            query = required_text(row, "query", where).strip()
            database = required_text(row, "database", where)
            if database in DATABASES:
                db_id, path = database, database_path(database)
            else:
                path = (base / database).resolve()
                if not path.is_file():
                    raise DatasetError(
                        f"{where}: database {database!r} is not a file ({path}) nor a bundled "
                        f"database ({', '.join(DATABASES)})"
                    )
                db_id = path.stem
            if path not in connections:
                connections[path] = connect_read_only(path)
            try:  # compiles the query without running it
                connections[path].execute(f"EXPLAIN {query}")
            except sqlite3.Error as error:
                raise DatasetError(f"{where}: the gold query does not compile: {error}") from None
            hashed = f"{db_id}\n{question}"  # as a generated task's id
            task_id = _row_id(row, ("id",), f"{db_id}-{short_digest(hashed)}", where)
            tasks.append(
                SQLTask(
                    _unique_id(task_id, seen, where), question, query, db_id, str(path), None, split
                )
            )
    finally:
        for connection in connections.values():
            connection.close()
    return tasks


def rag_rows(source: Any, passages: list[Passage], corpus_id: str = "user") -> list[RAGTask]:
    """Return rag-v0 tasks from rows ``{"question", "answer"}`` over the corpus ``passages``.

    Optional fields: ``id``, ``aliases`` (other accepted answers) and ``supporting_ids`` (the
    passages that answer it, first hop first: the oracle searches for their titles, and the
    task's hops are their count).

    Raises:
        DatasetError: a missing or malformed field, a supporting id not in the corpus, or an id
            used twice (the message names the row).
    """
    known = {passage.passage_id for passage in passages}
    tasks, seen = [], set()
    for where, row in located_rows(source, "rag-v0 tasks"):
        question = required_text(row, "question", where).strip()
        answer = required_text(row, "answer", where).strip()
        supporting = row.get("supporting_ids") or []
        if not isinstance(supporting, list) or not all(
            isinstance(i, str | int) and not isinstance(i, bool) for i in supporting
        ):
            raise DatasetError(f"{where}: field 'supporting_ids' must be a list of passage ids")
        supporting = [str(i) for i in supporting]
        missing = [i for i in supporting if i not in known]
        if missing:
            raise DatasetError(f"{where}: supporting ids not in the corpus: {missing}")
        task_id = _row_id(row, ("id",), f"task-{short_digest(question)}", where)
        tasks.append(
            RAGTask(
                _unique_id(task_id, seen, where),
                question,
                answer,
                _aliases(row, answer, where, "aliases"),
                tuple(supporting),
                len(supporting),
                corpus_id,
                None,
            )
        )
    return tasks
