"""Bad input on the command line is one line and exit 2 before anything heavy starts; a run
folder's history is never mixed with another run's; a warm start needs no repeated flags."""

import json

import pytest

from boltzoo.cli import _given_config, build_parser, main
from boltzoo.lightningrl.config import TrainerConfig

# A model that does not exist: a command that got as far as loading it would fail otherwise.
TRAIN = ["train", "tokens-v0", "--model", "/nonexistent/model", "--progress", "false"]


@pytest.fixture
def tiny_model_dir(tmp_path, smollm2_tokenizer):
    from boltzoo.agents.models import tiny_model

    folder = tmp_path / "model"
    tiny_model(len(smollm2_tokenizer), seed=0).save_pretrained(folder)
    smollm2_tokenizer.save_pretrained(folder)
    return folder


def exit_code(argv) -> int:
    """main's status, or argparse's (it exits)."""
    try:
        return main(argv)
    except SystemExit as exited:
        return exited.code


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        ([*TRAIN, "--group-size", "0"], "group_size must be at least 1, got 0"),
        ([*TRAIN, "--lr", "-1"], "lr must be above 0, got -1.0"),
        ([*TRAIN, "--lr", "nan"], "lr must be above 0, got nan"),
        ([*TRAIN, "--gamma", "1.5"], "gamma must be at least 0 and at most 1"),
        ([*TRAIN, "--dual-clip", "0.5"], "dual_clip must be above 1"),
        ([*TRAIN, "--max-train-minutes", "abc"], "--max-train-minutes: expected a number or none"),
        ([*TRAIN, "--steps", "2.5"], "--steps: expected a whole number"),
        ([*TRAIN, "--env-kwargs", "{bad"], "--env-kwargs: expected a JSON object"),
        ([*TRAIN, "--env-kwargs", "[1, 2]"], "--env-kwargs: expected a JSON object, got"),
        ([*TRAIN, "--policy-map", "[1]"], "--policy-map: expected a JSON object, got '[1]'"),
        (["train", "tokens-v0", "--model", "/nonexistent/model"], "no config.json in /nonexist"),
        ([*TRAIN, "--resume", "--overwrite"], "--resume continues a run, --overwrite deletes it"),
        ([*TRAIN, "--init-from", "/nonexistent/run"], "no checkpoint in /nonexistent/run"),
        (["eval", "math-v0", "--episodes", "-5"], "--episodes: expected a whole number at least 1"),
        (["eval", "math-v0", "--top-p", "0"], "--top-p: expected a number above 0 and at most 1"),
        (["sft", "math-v0", "--demos", "d.jsonl", "--batch-size", "0"], "batch_size must be at"),
        (["nosuch"], "invalid choice: 'nosuch'"),
    ],
)
def test_a_bad_input_is_one_line_and_exit_2_before_anything_loads(argv, said, capsys, tmp_path):
    argv = [*argv, "--output-dir", str(tmp_path / "run")] if argv[0] in ("train", "sft") else argv
    assert exit_code(argv) == 2
    assert said in one_line_error(capsys)


def test_an_output_dir_that_is_a_file_is_refused(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    assert main([*TRAIN, "--output-dir", str(tmp_path / "file")]) == 2
    assert "is a file, not a folder" in one_line_error(capsys)


def test_a_damaged_warm_start_is_refused_before_the_model_loads(tmp_path, capsys):
    from boltzoo.lightningrl.checkpoint import save_checkpoint

    folder = save_checkpoint(tmp_path / "sft" / "checkpoints", 1, {}, {"step": 1}, {})
    (folder / "state.pt").write_bytes((folder / "state.pt").read_bytes()[:40])
    assert main([*TRAIN, "--init-from", str(tmp_path / "sft"), "--output-dir", "x"]) == 2
    assert "state.pt cannot be read" in one_line_error(capsys)


def test_optional_numbers_turn_off_with_none_and_flags_left_out_keep_defaults():
    args = build_parser().parse_args(["train", "math-v0", "--dual-clip", "none"])
    config = TrainerConfig(**_given_config(args, TrainerConfig))
    assert config.dual_clip is None and TrainerConfig().dual_clip == 3.0
    assert config.lr == TrainerConfig().lr and config.max_train_minutes is None


def tiny_train(model_dir, run, *more):
    env_kwargs = json.dumps({"vocab_size": 49152, "target_size": 3000})
    return main(
        ["train", "tokens-v0", "--model", str(model_dir), "--env-kwargs", env_kwargs,
         "--output-dir", str(run), "--tasks-per-step", "2", "--group-size", "2",
         "--max-new-tokens", "4", "--progress", "false", "--steps", "1", *more]
    )  # fmt: skip


@pytest.mark.slow
def test_a_folder_holding_a_run_is_never_written_into_by_a_second_run(
    tiny_model_dir, tmp_path, capsys
):
    run = tmp_path / "run"
    assert tiny_train(tiny_model_dir, run, "--lr", "0.01") == 0
    first = (run / "metrics.jsonl").read_text()
    capsys.readouterr()
    assert tiny_train(tiny_model_dir, run) == 2  # without --resume
    assert "holds a run (metrics to step 1, checkpoint step-000001)" in one_line_error(capsys)
    assert (run / "metrics.jsonl").read_text() == first
    assert tiny_train(tiny_model_dir, run, "--overwrite", "--lr", "0.02") == 0
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1] and rows[0]["lr"] == 0.02
    (run / "checkpoints").rename(tmp_path / "gone")  # trained steps, and nothing to resume
    capsys.readouterr()
    assert tiny_train(tiny_model_dir, run, "--resume") == 2
    assert "no checkpoint to resume from" in one_line_error(capsys)


@pytest.mark.slow
def test_train_init_from_an_sft_run_takes_its_lora_settings(tiny_model_dir, tmp_path, capsys):
    demos = tmp_path / "demos.jsonl"
    assert main(["rollout", "math-v0", "--episodes", "4", "--out", str(demos), "--quiet"]) == 0
    sft = tmp_path / "sft"
    assert main(
        ["sft", "math-v0", "--model", str(tiny_model_dir), "--demos", str(demos),
         "--output-dir", str(sft), "--eval-tasks", "0", "--lora-r", "4", "--lora-alpha", "8",
         "--progress", "false"]
    ) == 0  # fmt: skip
    rl = tmp_path / "rl"
    base = ["train", "math-v0", "--init-from", str(sft), "--output-dir", str(rl), "--steps", "1",
            "--tasks-per-step", "1", "--group-size", "2", "--max-new-tokens", "4",
            "--progress", "false"]  # fmt: skip
    assert main(base) == 0  # no --model, no --lora-*: the warm start's
    saved = json.loads((rl / "checkpoints" / "step-000001" / "config.json").read_text())
    assert (saved["model"], saved["lora_r"], saved["lora_alpha"]) == (str(tiny_model_dir), 4, 8.0)
    capsys.readouterr()
    assert main([*base, "--output-dir", str(tmp_path / "rl2"), "--lora-r", "8"]) == 2
    assert "lora_r=8 (it has 4)" in one_line_error(capsys)
    # the run's one policy named (a JSON object): the same warm start, the same settings taken
    named = json.dumps({"policy": str(sft)})
    assert main([*base, "--init-from", named, "--output-dir", str(tmp_path / "rl3")]) == 0
    saved = json.loads((tmp_path / "rl3/checkpoints/step-000001/config.json").read_text())
    assert (saved["lora_r"], saved["init_from"]) == (4, {"policy": str(sft)})
    capsys.readouterr()
    with pytest.raises(SystemExit):  # a broken object is argparse's one-line error
        main([*base, "--init-from", '{"policy": ', "--output-dir", str(tmp_path / "rl4")])
    assert "--init-from: expected a JSON object" in capsys.readouterr().err
