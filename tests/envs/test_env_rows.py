"""Every bundled env plays rows of your own (``tasks=``) besides its generator: the rows keep the
env contract with the oracle succeeding, splits are explicit, and bad rows are named."""

import json
import sqlite3

import pytest

from boltzoo.envs import check_env
from boltzoo.errors import DatasetError
from boltzoo.registration import make

MATH_ROWS = [
    {"id": "apples", "question": "Ann has 3 bags of 12 apples. How many apples?", "answer": 36,
     "expression": "3*12"},
    {"question": "A 2.5 kg cake is cut into 4 equal parts. How heavy is a part?",
     "answer": "0.625"},
    {"question": "Tom had 1,200 marbles and lost 7. How many are left?", "answer": "1,193",
     "expression": "1200-7"},
    {"question": "One cake is shared equally by 3 friends. What part does each get?",
     "answer": "1/3"},
    {"question": "What is 15 percent of 80?", "answer": 12.0, "expression": "80*15/100"},
]  # fmt: skip


def test_math_rows_keep_the_contract_and_the_oracle_solves_them():
    passed = check_env("boltzoo/math-v0", tasks={"train": MATH_ROWS, "test": MATH_ROWS[:4]})
    assert "the oracle: 4/4 tasks succeeded" in passed
    tasks = make("boltzoo/math-v0", tasks=MATH_ROWS).unwrapped.tasks
    assert [t.answer for t in tasks] == ["36", "0.625", "1193", "1/3", "12"]
    assert tasks[0].task_id == "apples" and tasks[1].task_id.startswith("task-")
    assert [t.expression for t in tasks] == ["3*12", None, "1200-7", None, "80*15/100"]


def test_math_rows_from_a_file_are_the_train_split_only(tmp_path):
    path = tmp_path / "mine.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in MATH_ROWS))
    assert make("boltzoo/math-v0", tasks=str(path)).unwrapped.num_tasks == 5
    with pytest.raises(DatasetError, match="'train' split only"):
        make("boltzoo/math-v0", tasks=str(path), split="test")
    with pytest.raises(DatasetError, match="no split 'test'"):
        make("boltzoo/math-v0", tasks={"train": str(path)}, split="test")


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"question": "Q?"}, "missing field 'answer'"),
        ({"question": "Q?", "answer": "many"}, "answer 'many' is not a number"),
        ({"question": "Q?", "answer": True}, "must be a number"),
        ({"question": "", "answer": 1}, "question"),
        ({"question": "Q?", "answer": 7, "expression": "3+3"}, "does not evaluate exactly to the"),
        ({"question": "Q?", "answer": 7, "expression": 7}, "'expression' must be a string"),
    ],
)
def test_bad_math_rows_are_named(row, message):
    with pytest.raises(DatasetError, match=message) as caught:
        make("boltzoo/math-v0", tasks=[MATH_ROWS[0], row])
    assert "rows[1]" in str(caught.value)


def test_rows_are_the_data_set_not_beside_one():
    with pytest.raises(DatasetError, match="leave dataset= and path= out"):
        make("boltzoo/math-v0", tasks=MATH_ROWS, dataset="gsm8k")
    with pytest.raises(DatasetError, match="used twice"):
        make("boltzoo/math-v0", tasks=[MATH_ROWS[0], MATH_ROWS[0]])


@pytest.fixture
def shop_db(tmp_path):
    """A SQLite file of a user's own, beside the rows file that names it by a relative path."""
    path = tmp_path / "shop.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE item (name TEXT, price REAL, stock INTEGER)")
        db.executemany(
            "INSERT INTO item VALUES (?, ?, ?)",
            [("pen", 1.5, 40), ("ink", 7.0, 3), ("pad", 2.25, 0), ("clip", 0.1, 500)],
        )
    db.close()
    return path


SQL_ROWS = [
    {"question": "Which items cost more than 2?", "query": "SELECT name FROM item WHERE price > 2",
     "database": "shop.sqlite"},
    {"question": "How many items are out of stock?",
     "query": "SELECT COUNT(*) FROM item WHERE stock = 0", "database": "shop.sqlite"},
    {"question": "What is the cheapest item?",
     "query": "SELECT name FROM item ORDER BY price LIMIT 1", "database": "shop.sqlite"},
    {"id": "genres", "question": "How many genres are there?",
     "query": "SELECT COUNT(*) FROM Genre", "database": "chinook"},
]  # fmt: skip


def test_sql_rows_over_your_own_database_keep_the_contract(tmp_path, shop_db):
    path = tmp_path / "sql.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in SQL_ROWS))
    passed = check_env("boltzoo/sql-v0", tasks={"train": str(path), "test": str(path)})
    assert "the oracle: 4/4 tasks succeeded" in passed
    tasks = make("boltzoo/sql-v0", tasks=str(path)).unwrapped.tasks
    assert tasks[0].database == str(shop_db.resolve()) and tasks[0].db_id == "shop"
    assert tasks[3].task_id == "genres" and tasks[3].db_id == "chinook"
    assert tasks[0].task_id.startswith("shop-") and tasks[0].split == "train"


def test_bad_sql_rows_are_named(tmp_path, shop_db):
    path = tmp_path / "sql.json"
    broken = {**SQL_ROWS[0], "query": "SELECT nme FROM item WHERE"}
    path.write_text(json.dumps([SQL_ROWS[1], broken]))
    with pytest.raises(DatasetError, match=r"row 1: the gold query does not compile"):
        make("boltzoo/sql-v0", tasks=str(path))
    missing = {**SQL_ROWS[0], "database": "elsewhere.sqlite"}
    path.write_text(json.dumps([missing]))
    with pytest.raises(DatasetError, match="'elsewhere.sqlite' is not a file"):
        make("boltzoo/sql-v0", tasks=str(path))
    with pytest.raises(DatasetError, match="missing field 'query'|'query'"):
        make("boltzoo/sql-v0", tasks=[{"question": "Q?", "database": "chinook"}])


CORPUS = [
    {"id": "p1", "title": "Mira Holt", "text": "Mira Holt was born in the town of Vell."},
    {"id": "p2", "title": "Vell", "text": "Vell lies on the river Osk in the north."},
    {"id": "p3", "title": "Osk", "text": "The Osk flows into the Grey Sea."},
    {"id": "p4", "title": "Dano Pike", "text": "Dano Pike founded the Lantern Press in 1931."},
]
RAG_ROWS = [
    {"question": "On which river lies the town where Mira Holt was born?", "answer": "Osk",
     "supporting_ids": ["p1", "p2"], "aliases": ["the Osk", "river Osk"]},
    {"question": "Into which sea flows the river of Vell?", "answer": "Grey Sea",
     "supporting_ids": ["p2", "p3"]},
    {"question": "In which year was the Lantern Press founded?", "answer": "1931",
     "supporting_ids": ["p4"]},
    {"id": "founder", "question": "Who founded the Lantern Press?", "answer": "Dano Pike",
     "supporting_ids": ["p4"]},
]  # fmt: skip


def test_rag_rows_with_a_corpus_keep_the_contract():
    kwargs = {"tasks": {"train": RAG_ROWS, "test": RAG_ROWS}, "corpus": CORPUS}
    passed = check_env("boltzoo/rag-v0", retriever="bm25", **kwargs)
    assert "the oracle: 4/4 tasks succeeded" in passed
    env = make("boltzoo/rag-v0", retriever="bm25", hops=2, tasks=RAG_ROWS, corpus=CORPUS)
    assert [t.question for t in env.unwrapped.tasks] == [r["question"] for r in RAG_ROWS[:2]]
    assert env.unwrapped.tasks[0].aliases == ("the Osk", "river Osk")


def test_bad_rag_rows_are_named():
    with pytest.raises(DatasetError, match="tasks= needs corpus="):
        make("boltzoo/rag-v0", tasks=RAG_ROWS)
    unknown = [{**RAG_ROWS[0], "supporting_ids": ["p1", "p9"]}]
    with pytest.raises(DatasetError, match=r"rows\[0\]: supporting ids not in the corpus: .'p9'."):
        make("boltzoo/rag-v0", tasks=unknown, corpus=CORPUS)
    with pytest.raises(DatasetError, match="used twice"):
        make("boltzoo/rag-v0", tasks=RAG_ROWS, corpus=[CORPUS[0], CORPUS[0]])
