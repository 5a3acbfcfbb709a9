"""The documentation cannot rot: every code block of the site's pages and the README is run here
or marked with why not, and the reference pages are made from the code.

A block is marked by an HTML comment on the line above it: ``<!-- docs: run -->`` (run here, in
the page's order, in a folder of its own), ``<!-- docs: file NAME -->`` (written to NAME there, for
the blocks after it) or ``<!-- docs: not run: REASON -->``. Run blocks use a tiny model and short
settings where the page shows the real ones (``SHORT``); they run in the ``docs`` tier
(``pytest -m docs``, which ``bash scripts/setup.sh docs`` and CI run), not in the default suite.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
PAGES = sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
MARK = re.compile(r"<!-- docs: (run|file [\w./-]+|not run: .+?) -->\n$")
CODE = {"python", "bash", "sh", "toml"}  # blocks that are code; text and output need no mark
# The real settings a page shows -> the test's short ones (a tiny model does not learn anyway).
SHORT = [
    (r"--episodes \d+", "--episodes 2"), (r"--eval-tasks \d+", "--eval-tasks 2"),
    (r"--steps \d+", "--steps 1"), (r"--max-new-tokens \d+", "--max-new-tokens 8"),
    (r"--max-train-minutes \d+", "--max-train-minutes 5"),
    (r"\bsteps=\d+", "steps=1"), (r"\beval_every=\d+", "eval_every=0"),
    (r"\btasks_per_step=\d+", "tasks_per_step=2"), (r"\bgroup_size=\d+", "group_size=2"),
    (r"\bmax_new_tokens=\d+", "max_new_tokens=8"), (r"\bepisodes=\d+", "episodes=2"),
    (r"\btasks=range\(\d+\)", "tasks=range(2)"),
]  # fmt: skip
# Flags every command of these kinds gets at its end (the last of a repeated flag wins)
APPENDED = {
    "train": "--eval-tasks 2 --tasks-per-step 2 --group-size 2 --max-new-tokens 8",
    "sft": "--eval-tasks 2 --max-new-tokens 8",
    "eval": "--episodes 2 --max-new-tokens 8",
    "rollout": "--max-new-tokens 8",
}


@dataclasses.dataclass
class Block:
    page: Path
    language: str
    code: str
    mark: str | None  # "run", "file NAME", "not run: REASON" or None
    line: int

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """Return the page's fenced code blocks with the mark above each."""
    text = page.read_text()
    found = []
    for match in FENCE.finditer(text):
        before = text[: match.start()]
        mark = MARK.search(before[-300:])
        line = before.count("\n") + 1
        found.append(Block(page, match.group(1), match.group(2), mark and mark.group(1), line))
    return found


def test_every_code_block_is_run_or_says_why_not():
    unmarked = [str(b) for page in PAGES for b in blocks(page) if b.language in CODE and not b.mark]
    assert not unmarked, f"code blocks with no <!-- docs: ... --> mark: {unmarked}"
    reasons = [
        b.mark for page in PAGES for b in blocks(page) if (b.mark or "").startswith("not run")
    ]
    assert all(len(reason) > len("not run: ") + 10 for reason in reasons), reasons


def shortened(code: str, model: Path) -> str:
    """Return a block with the tiny model and the short settings (see SHORT, APPENDED)."""
    code = code.replace("smollm2-135m", str(model))
    for real, short in SHORT:
        code = re.sub(real, short, code)
    return code


def shell_script(code: str) -> str:
    """Return a bash block as a script: continuation lines joined, comments dropped, the short
    flags appended to boltzoo's commands, stopping at the first command that fails."""
    lines = []
    for line in code.replace("\\\n", " ").splitlines():
        line = line.split("  #")[0].rstrip()
        command = re.search(r"\bboltzoo (\w+)", line)
        if command and command.group(1) in APPENDED:
            # before a redirection, if any
            head, redirect, tail = line.partition(" > ")
            line = f"{head} {APPENDED[command.group(1)]}{redirect}{tail}"
        lines.append(line)
    return "set -euo pipefail\n" + "\n".join(lines) + "\n"


def run_page(page: Path, workdir: Path, model: Path) -> list[str]:
    """Run a page's marked blocks in order in ``workdir``; return each block's output."""
    for name in ("examples", "scripts"):  # pages refer to the repository's files
        (workdir / name).symlink_to(ROOT / name)
    env = os.environ | {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    outputs = []
    for block in blocks(page):
        if block.mark is None or block.mark.startswith("not run"):
            continue
        if block.mark.startswith("file "):
            (workdir / block.mark.split(" ", 1)[1]).write_text(block.code)
            continue
        code = shortened(block.code, model)
        if block.language == "python":
            argv = [sys.executable, "-c", code]
        else:
            argv = ["bash", "-c", shell_script(code)]
        done = subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True,
                              timeout=900)  # fmt: skip
        assert done.returncode == 0, (
            f"{block}\n{code}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
        )
        outputs.append(done.stdout)
    return outputs


RUN_PAGES = [p for p in PAGES if any(b.mark == "run" for b in blocks(p))]


@pytest.mark.docs
@pytest.mark.slow
@pytest.mark.parametrize("page", RUN_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_page_runs_as_written(page, tmp_path, smollm2_tokenizer):
    from boltzoo.agents.models import tiny_model

    model = tmp_path / "tiny"
    tiny_model(len(smollm2_tokenizer), seed=0).save_pretrained(model)
    smollm2_tokenizer.save_pretrained(model)
    workdir = tmp_path / "page"
    workdir.mkdir()
    outputs = run_page(page, workdir, model)
    check = PAGE_CHECKS.get(page.relative_to(ROOT).as_posix())
    if check:
        check(workdir, outputs)


def own_env_went_from_rows_to_a_trained_model(workdir: Path, outputs: list[str]) -> None:
    rows = (workdir / "dates_train.jsonl").read_text().splitlines()
    assert len(rows) == 400 and len((workdir / "dates_test.jsonl").read_text().splitlines()) == 100
    assert "ok the oracle: 4/4 tasks succeeded" in outputs[0]
    demos = [json.loads(line) for line in (workdir / "demos.jsonl").read_text().splitlines()]
    assert len(demos) == 2 and all(d["success"] for d in demos)
    assert (workdir / "runs" / "dates-sft" / "checkpoints" / "latest").is_file()
    metrics = (workdir / "runs" / "dates-rl" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in metrics if '"step"' in line][-1] == 1


PAGE_CHECKS = {"docs/guides/own-env.md": own_env_went_from_rows_to_a_trained_model}


def load_hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    return hooks


def test_the_config_reference_is_the_fields_help(monkeypatch):
    from boltzoo.lightningrl.config import TrainerConfig

    hooks = load_hooks()
    page = hooks.config_reference()
    lr = next(f for f in dataclasses.fields(TrainerConfig) if f.name == "lr")
    assert f"| `lr` | float | `0.0001` | {lr.metadata['help']} |" in page
    # every field of both configs has its row, once per config
    for cls in ("TrainerConfig", "SFTConfig"):
        assert f"## `{cls}`" in page
    assert page.count("| `kl_coef` |") == 1 and page.count("| `lora_r` |") == 2
    # a field's help changed in the code is changed on the page
    metadata = dict(lr.metadata) | {"help": "the step size, changed for this test"}
    monkeypatch.setattr(lr, "metadata", metadata)
    assert "| the step size, changed for this test |" in hooks.config_reference()


def test_the_cli_reference_is_the_parser():
    from boltzoo.cli import build_parser

    hooks = load_hooks()
    parser = build_parser()
    page = hooks.cli_reference(parser)
    train = next(a for a in parser._actions if hasattr(a, "choices") and a.choices and
                 "train" in a.choices).choices["train"]  # fmt: skip
    for action in train._actions:
        if isinstance(action, argparse._HelpAction):
            continue  # every command has -h, --help: the page leaves it out
        for flag in action.option_strings:
            assert f"`{flag}`" in page, flag
    assert "## boltzoo train" in page and "## boltzoo serve" in page
    # a flag's help changed in the parser is changed on the page
    steps = next(a for a in train._actions if "--steps" in a.option_strings)
    steps.help = "how many steps, changed for this test"
    assert "how many steps, changed for this test" in hooks.cli_reference(parser)


def test_an_env_page_is_its_docstring_and_an_oracle_episode():
    from boltzoo.envs import math_v0

    page = load_hooks().env_page("boltzoo/math-v0")
    title = math_v0.__doc__.strip().splitlines()[0]
    assert page.startswith(f"# {title.rstrip('.')}\n")
    assert (
        "## Rewards and infos" in page and "Create it with every argument at its default:\n" in page
    )
    episode = page.split("## An example episode", 1)[1]
    assert "<calc>" in episode and "Score 1.0, success True" in episode


def results_table(text: str) -> str:
    """Return the results-at-a-glance table of a page (its rows as written)."""
    match = re.search(r"^\| env and agent \|.*?(?=\n\n)", text, re.S | re.M)
    assert match, "no results-at-a-glance table"
    return match.group(0)


def test_the_readme_shows_the_benchmarks_results_table():
    benchmarks = results_table((ROOT / "BENCHMARKS.md").read_text())
    readme = results_table((ROOT / "README.md").read_text())
    assert readme == benchmarks.replace("](#", "](BENCHMARKS.md#")
    # BENCHMARKS.md's first screen is its two tables
    head = (ROOT / "BENCHMARKS.md").read_text().split("\n## ")
    assert head[1].startswith("Results at a glance") and head[2].startswith(
        "Throughput at a glance"
    )


def test_the_readmes_links_lead_somewhere():
    """README.md is not a page of the site (whose build checks its own links): check its links
    here, anchors included, as GitHub and MkDocs make them from headings."""
    from pymdownx.slugs import slugify

    slug = slugify(case="lower")
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", (ROOT / "README.md").read_text()):
        if re.match(r"^[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        file = ROOT / path
        if not file.exists():
            broken.append(target)
        elif anchor:
            headings = re.findall(r"^#+ (.+)$", file.read_text(), re.M)
            if anchor not in {slug(h, "-") for h in headings}:
                broken.append(target)
    assert not broken, broken
