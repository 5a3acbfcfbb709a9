"""The README's guides run as written: their marked code blocks, with a tiny model and short
settings where the page shows the real ones (the commands are otherwise unchanged)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).parents[1] / "README.md"
# the real settings the page shows -> the test's short ones
SHORT = {
    "--episodes 100": "--episodes 2",
    "--episodes 16": "--episodes 4",
    "--eval-tasks 100": "--eval-tasks 2",
    "--steps 40": "--steps 1",
    "--max-new-tokens 64": "--max-new-tokens 8",
}


def guide_block(name: str) -> str:
    """Return the code block after the README's ``<!-- guide: NAME -->`` marker."""
    match = re.search(rf"<!-- guide: {re.escape(name)} -->\n```\w*\n(.*?)```", README.read_text(),
                      re.S)  # fmt: skip
    assert match, f"no block marked {name!r} in README.md"
    return match.group(1)


def commands(block: str) -> list[str]:
    """Return the block's shell commands (continuation lines joined, comments dropped)."""
    lines = block.replace("\\\n", " ").splitlines()
    return [line.split("  #")[0].strip() for line in lines if line.strip()]


@pytest.mark.slow
def test_the_own_env_guide_goes_from_rows_to_a_trained_model(tmp_path, smollm2_tokenizer):
    from boltzoo.agents.models import tiny_model

    model = tmp_path / "tiny"
    tiny_model(len(smollm2_tokenizer), seed=0).save_pretrained(model)
    smollm2_tokenizer.save_pretrained(model)
    (tmp_path / "my_task.py").write_text(guide_block("own-env my_task.py"))
    block = guide_block("own-env commands")
    for real, short in SHORT.items():
        assert real in block, f"the guide no longer shows {real!r}: update SHORT"
        block = block.replace(real, short)
    block = block.replace("--model smollm2-135m", f"--model {model}")
    outputs = []
    for command in commands(block):
        argv = shlex.split(command)
        argv = [sys.executable, *argv[1:]] if argv[0] == "python" else [
            sys.executable, "-m", "boltzoo", *argv[1:]
        ]  # fmt: skip
        done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{command}\n{done.stderr[-3000:]}"
        outputs.append(done.stdout)
    rows = (tmp_path / "dates_train.jsonl").read_text().splitlines()
    assert len(rows) == 400 and len((tmp_path / "dates_test.jsonl").read_text().splitlines()) == 100
    assert "ok the oracle: 4/4 tasks succeeded" in outputs[1]
    demos = [json.loads(line) for line in (tmp_path / "demos.jsonl").read_text().splitlines()]
    assert len(demos) == 4 and all(d["success"] for d in demos)
    assert (tmp_path / "runs" / "dates-sft" / "checkpoints" / "latest").is_file()
    metrics = (tmp_path / "runs" / "dates-rl" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in metrics if '"step"' in line][-1] == 1
