"""scripts/bench_warm_start.py: which warm start each policy of a policy map starts from, and a
run continued with ``--resume``."""

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


@pytest.mark.slow
def test_resume_continues_the_rl_run_and_keeps_what_was_done(
    bench, tmp_path, smollm2_tokenizer, monkeypatch
):
    """A run stopped by its ``--minutes`` (or killed) continues with ``--resume``: the
    demonstrations and the warm start are not made again, RL goes on from its checkpoint (its
    steps continue, none is done twice) to the new ``--minutes``, and the record counts every
    step of the run."""
    import json

    from boltzoo.agents.models import tiny_model

    model_dir, run_dir = tmp_path / "model", tmp_path / "run"
    tiny_model(len(smollm2_tokenizer), seed=0).save_pretrained(model_dir)
    smollm2_tokenizer.save_pretrained(model_dir)
    out = tmp_path / "held_out.json"

    def run(minutes: float, *extra: str, demos: int = 4) -> None:
        argv = ["bench_warm_start.py", "math-v0", "--model", str(model_dir), "--demos", str(demos),
                "--env-kwargs", '{"level": "easy", "max_turns": 1}', "--minutes", str(minutes),
                "--tasks-per-step", "2", "--group-size", "2", "--max-new-tokens", "8",
                "--eval-tasks", "2", "--stages", "rl", "--run-dir", str(run_dir),
                "--out", str(out), *extra]  # fmt: skip
        monkeypatch.setattr("sys.argv", argv)
        bench.main()

    def steps() -> list[dict]:
        lines = (run_dir / "rl" / "metrics.jsonl").read_text().splitlines()
        return [row for row in map(json.loads, lines) if "reward" in row]

    run(0.0001)  # one step: the clock has passed the limit after it
    assert [row["step"] for row in steps()] == [1]
    demos = (run_dir / "demos.jsonl").stat().st_mtime_ns
    sft_metrics = (run_dir / "sft" / "metrics.jsonl").read_text()
    with pytest.raises(SystemExit, match="holds an earlier run"):
        run(1.0)  # without --resume the folder is not run over
    with pytest.raises(SystemExit, match="holds 4 episodes, this command asks for 8"):
        run(1.0, "--resume", demos=8)  # its warm start learned from 4: not continued on 8
    # one more step: the limit sits just past the first step's training time
    run(steps()[0]["train_seconds"] / 60 + 1e-6, "--resume")
    assert [row["step"] for row in steps()] == [1, 2]
    assert steps()[1]["train_seconds"] > steps()[0]["train_seconds"]
    assert (run_dir / "demos.jsonl").stat().st_mtime_ns == demos  # not recorded again
    assert (run_dir / "sft" / "metrics.jsonl").read_text() == sft_metrics  # not trained again
    record = json.loads(out.read_text())
    assert record["rl_steps"] == 2 and "--resume" in record["command"]
    assert (run_dir / "rl" / "checkpoints" / "latest").read_text().strip() == "step-000002"
    with pytest.raises(SystemExit, match="holds no run to continue"):
        monkeypatch.setattr("sys.argv", ["bench_warm_start.py", "math-v0", "--resume",
                                         "--run-dir", str(tmp_path / "none"), "--out",
                                         str(out)])  # fmt: skip
        bench.main()


@pytest.mark.slow
def test_a_warm_start_on_other_tasks_and_replay_of_another_stages_demonstrations(
    bench, tmp_path, smollm2_tokenizer, monkeypatch, capfd
):
    """``--demo-env-kwargs`` holds for the demonstrations and the warm start only (here medium
    questions), RL and its evaluations keep ``--env-kwargs`` (easy ones); ``--replay-extra``
    has RL replay that file, and ``--sft-extra`` the first SFT pass learn it, beside the run's
    own demonstrations; without ``--replay-calls`` or with a missing file the command stops
    before it runs anything."""
    import json

    from boltzoo.agents.models import tiny_model

    model_dir, run_dir = tmp_path / "model", tmp_path / "run"
    tiny_model(len(smollm2_tokenizer), seed=0).save_pretrained(model_dir)
    smollm2_tokenizer.save_pretrained(model_dir)
    out, extra = tmp_path / "held_out.json", tmp_path / "earlier_stage.jsonl"
    bench.boltzoo("rollout", "math-v0", "--policy", "oracle", "--episodes", "2", "-e",
                  'level="hard"', "-e", "max_turns=1", "--out", str(extra), "--quiet")  # fmt: skip

    def run(*options: str) -> None:
        argv = ["bench_warm_start.py", "math-v0", "--model", str(model_dir), "--demos", "4",
                "--env-kwargs", '{"level": "easy", "max_turns": 1}', "--minutes", "0.0001",
                "--tasks-per-step", "2", "--group-size", "2", "--max-new-tokens", "8",
                "--eval-tasks", "2", "--stages", "rl", "--run-dir", str(run_dir),
                "--out", str(out), *options]  # fmt: skip
        monkeypatch.setattr("sys.argv", argv)
        bench.main()

    with pytest.raises(SystemExit, match="--replay-extra needs --replay-calls"):
        run("--replay-extra", str(extra))
    with pytest.raises(SystemExit, match="--replay-extra: no file .*none.jsonl"):
        run("--replay-calls", "2", "--replay-extra", str(tmp_path / "none.jsonl"))
    with pytest.raises(SystemExit, match="--sft-extra: no file .*none.jsonl"):
        run("--sft-extra", str(tmp_path / "none.jsonl"))
    assert not run_dir.exists()  # (nothing ran)
    run("--demo-env-kwargs", '{"level": "medium"}', "--replay-calls", "2",
        "--replay-extra", str(extra), "--sft-extra", str(extra), "--task-sampling",
        "learnability", "--task-pool-field", "template")  # fmt: skip
    assert "from 6 demonstrations" in capfd.readouterr().out  # the run's 4 and the extra 2
    demos = [json.loads(line) for line in (run_dir / "demos.jsonl").read_text().splitlines()]
    assert len(demos) == 4 and all(d["task_id"].startswith("medium-") for d in demos)
    sft = json.loads((run_dir / "sft" / "config.json").read_text())
    assert sft["env_kwargs"] == {"level": "medium", "max_turns": 1}
    assert sft["demos"] == [str(run_dir / "demos.jsonl"), str(extra)]
    rl = json.loads((run_dir / "rl" / "config.json").read_text())
    assert rl["env_kwargs"] == {"level": "easy", "max_turns": 1}
    assert rl["replay_demos"] == [str(run_dir / "demos.jsonl"), str(extra)]
    assert (rl["task_sampling"], rl["task_pool_field"]) == ("learnability", "template")
    record = json.loads(out.read_text())
    assert record["demo_env_kwargs"] == {"level": "medium", "max_turns": 1}
    assert record["replay_extra"] == [str(extra)]
    assert record["sft_extra"] == [str(extra)]
