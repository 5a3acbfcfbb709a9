"""scripts/bench_warm_start.py's choices that are not a run: which warm start each policy of a
policy map starts from."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).parents[1] / "scripts"


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(SCRIPTS))  # (its own imports: benchlib)
    spec = importlib.util.spec_from_file_location(
        "bench_warm_start", SCRIPTS / "bench_warm_start.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_policy_starts_from_the_pass_that_taught_its_agents(bench):
    first, second = Path("run/sft"), Path("run/sft_review")
    # the SQL graph's recipe 3: the writer's adapter from the first pass, the reviewers' from
    # the second (the checker, frozen, acts with "review" too)
    warm = bench.policy_warm_starts(
        {"writer": "writer", "rewriter": "review"}, ["checker", "rewriter"], first, second
    )
    assert warm == {"writer": "run/sft", "review": "run/sft_review"}
    # without review episodes every policy starts from the first pass
    assert bench.policy_warm_starts({"writer": "a", "rewriter": "b"}, [], first, second) == {
        "a": "run/sft",
        "b": "run/sft",
    }
    # one adapter cannot start from two runs: a clear error, not the last one silently
    with pytest.raises(SystemExit, match="policy 'shared' has agents from both"):
        bench.policy_warm_starts(
            {"writer": "shared", "rewriter": "shared"}, ["rewriter"], first, second
        )
