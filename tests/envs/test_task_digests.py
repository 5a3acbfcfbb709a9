"""The bundled generators' task lists, pinned: ids, questions, gold queries and answers of every
split at the default seeds. Rewriting how tasks are made (templates as tables) must not change
one task, so every recorded benchmark stays valid; a deliberate change updates the digest here
and says so in BENCHMARKS.md."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pytest

from boltzoo.envs.data import math_tasks, rag_tasks, sql_synthetic, sql_tasks


def digest(tasks) -> str:
    """Return sha256 of the tasks' fields as JSON (a database by its file name, not its path)."""
    rows = []
    for task in tasks:
        row = dataclasses.asdict(task)
        if "database" in row:
            row["database"] = Path(row["database"]).name
        rows.append(row)
    return hashlib.sha256(json.dumps(rows, sort_keys=True, default=str).encode()).hexdigest()


def rag_digest(dataset) -> str:
    corpora = {k: [dataclasses.asdict(p) for p in v] for k, v in sorted(dataset.corpora.items())}
    text = json.dumps([digest(dataset.tasks), corpora], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


GENERATED = {
    **{
        f"math {level} {split}": (lambda level=level, split=split: digest(
            math_tasks.generate_tasks(level, split)))
        for level in ("easy", "medium", "hard") for split in ("train", "test")
    },
    **{
        f"sql {split}": (lambda split=split: digest(sql_tasks.generate_tasks(split)))
        for split in ("train", "test", "test_unseen")
    },
    "sql synthetic 2 tables": lambda: digest(sql_synthetic.synthetic_tasks(12, tables=2)),
    "sql synthetic 4 tables": lambda: digest(sql_synthetic.synthetic_tasks(6, tables=4)),
    "sql synthetic extended": lambda: digest(
        sql_synthetic.synthetic_tasks(6, tables=4, kinds="extended")),
    **{
        f"rag {split}": (lambda split=split: rag_digest(rag_tasks.generate_dataset(split)))
        for split in ("train", "test")
    },
}  # fmt: skip

PINNED = {  # at 24a67aa (2026-12-05), before the templates became tables
    "math easy test": "79e072a7b9909f4bde0a74e8a807953553647f4531eaf55f87bad169c8bbca9b",
    "math easy train": "62ca162fb477098c5294b4e284440e20dd1e6778aa613fb88b181d305b17ce2a",
    "math hard test": "1e882d76b15dec8356c62dbddef15b0cc6199d13273a98df5942366b5c6a0653",
    "math hard train": "61597599a52fc107712cdc28bcaa2bfcbd45d34c59155a4aa7ecf7305ac88d83",
    "math medium test": "346c1a6d38f62690dd12f60ad782e3808c72e22c6d6dc063d30911fe5177924f",
    "math medium train": "e50ef023ccefa98441b58755ce81c02f1df85e29fc114d22251962e9bd19d43a",
    "rag test": "d12b508bc1dde7ac925e70013f4c862da09730b88dee4cc78b02db9b7adcf3b5",
    "rag train": "accedad559272436e607fe309de9b1aefc9cdb944ef3da08f97995808e6e1426",
    "sql synthetic 2 tables": "b7df6e0e8013f2dbe03d26e3042ca09932ba67353a15734648edc8fb4905d511",
    "sql synthetic 4 tables": "0b1d98754f9e399d235c2e958fe01fa31b5733325711ed47b89d417c9b1eb144",
    "sql synthetic extended": "c9e980f01b07246e56459b0c6992301eae1a2077c6967b866de53f444e321bb0",
    "sql test": "17c39bbe3de117c3124690fd60665f2e728274b7f7b01ef0b63b15a2be5e251f",
    "sql test_unseen": "94a9521c8ccb66c9979dbef9590f117928ef228c1e6546b3d35b8b522b5e8039",
    "sql train": "9b1428f31c0075b45edc7d7ad5be28b39e4e368a824a6fd9386b232ecceb7ccb",
}


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_generated_tasks_are_unchanged(name):
    assert GENERATED[name]() == PINNED[name], f"the {name} tasks changed"
