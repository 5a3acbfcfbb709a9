"""An env in a package of its own: `pip install` it and its id works everywhere an id does.

The package is examples/units (a TaskEnv and its rows; its pyproject.toml declares the
`boltzoo.envs` entry point), installed with pip into a folder of its own, which a fresh
`python -m boltzoo` process then has on its path: nothing registers the env by hand.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).parents[1] / "examples" / "units"


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """Install examples/units with pip into a folder; return the environment that sees it."""
    root = tmp_path_factory.mktemp("installed")
    source = root / "units"  # a copy: building writes into the source folder
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    target = root / "site"
    # build with this environment's setuptools when it has one (no download), else pip's way
    isolation = [] if importlib.util.find_spec("setuptools") is None else ["--no-build-isolation"]
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", *isolation,
         "--target", str(target), str(source)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    assert list(target.glob("boltzoo_units_example-*.dist-info"))
    paths = [str(target), os.environ.get("PYTHONPATH", "")]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in paths if p))


def boltzoo_cli(env, *args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "boltzoo", *args],
        env=env, cwd=cwd, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


@pytest.mark.slow
def test_an_installed_env_is_listed_and_keeps_the_contract(installed, tmp_path):
    listed = boltzoo_cli(installed, "envs", cwd=tmp_path)
    assert listed.returncode == 0 and "examples/units-v0" in listed.stdout.split()
    checked = boltzoo_cli(installed, "check", "examples/units-v0", cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert "ok the oracle: 4/4 tasks succeeded" in checked.stdout


@pytest.mark.slow
@pytest.mark.ray
def test_an_installed_env_trains_a_step_through_the_cli_on_a_ray_worker(
    installed, tmp_path, smollm2_tokenizer
):
    pytest.importorskip("ray")
    from boltzoo.agents.models import tiny_model

    model = tmp_path / "model"
    tiny_model(len(smollm2_tokenizer), seed=0).save_pretrained(model)
    smollm2_tokenizer.save_pretrained(model)
    run = tmp_path / "run"
    trained = boltzoo_cli(
        installed, "train", "examples/units-v0", "--model", str(model), "--output-dir", str(run),
        "--steps", "1", "--tasks-per-step", "2", "--group-size", "2", "--max-new-tokens", "8",
        "--eval-tasks", "2", "--save-every", "0", "--progress", "false",
        "--rollout-workers", "1", cwd=tmp_path,
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr[-3000:]
    (metrics,) = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert metrics["step"] == 1 and metrics["episodes"] == 4 and metrics["failed_episodes"] == 0
    assert json.loads((run / "config.json").read_text())["env"] == "examples/units-v0"
