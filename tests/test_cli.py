"""The boltzoo command line."""

import json

from boltzoo.cli import main


def test_eval_oracle_prints_full_success(capsys):
    assert (
        main(["eval", "math-v0", "--policy", "oracle", "--episodes", "20", "--json", "--quiet"])
        == 0
    )
    summary = json.loads(capsys.readouterr().out)
    assert summary["success_rate"] == 1.0 and summary["episodes"] == 20 and summary["failed"] == 0


def test_eval_naive_is_worse_than_oracle_and_takes_env_args(capsys):
    main(
        [
            "eval",
            "math-v0",
            "--policy",
            "naive",
            "--json",
            "--quiet",
            "-e",
            "level=medium",
            "-e",
            'agents=["solver","verifier"]',
        ]
    )
    summary = json.loads(capsys.readouterr().out)
    assert summary["episodes"] > 150 and summary["success_rate"] < 0.5


def test_unknown_env_is_a_one_line_error(capsys):
    assert main(["eval", "nope-v0", "--quiet"]) == 2
    assert "no boltzoo env 'nope-v0'" in capsys.readouterr().err
