"""MkDocs hooks: the pages nothing writes by hand.

Each reference page is made at build time from what the code already holds, so a page cannot
say something the code does not: the config reference from the ``TrainerConfig`` / ``SFTConfig``
fields and their help text, the command line from the argparse parser, an env's page from its
module docstring (PettingZoo's way) with an episode the env's oracle plays, and the benchmarks
pages from the repository's markdown (with the files they link to).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import os
import re
import typing
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# Markdown files of the repository that are pages of the site (their links to files of the
# repository are kept working by copying those files into the site).
REPO_PAGES = {"BENCHMARKS.md": "benchmarks/index.md"} | {
    log.relative_to(ROOT).as_posix(): log.relative_to(ROOT).as_posix()
    for log in sorted((ROOT / "benchmarks" / "logs").glob("*.md"))
}
# Envs whose example episode needs arguments (their tasks are the user's own)
EXAMPLE_KWARGS: dict[str, dict[str, Any]] = {
    "math-v0": {"level": "easy"},
    "rag-v0": {"retriever": "bm25"},
    "prompts-v0": {"split": "train"},  # its example rows are a train split only
}
_LINK = re.compile(r"(!?\[[^\]]*\]\()([^)\s]+)(\))")


def _type_name(hint: Any) -> str:
    """Return a type hint as a reader writes it (``list[str] | None``, ``'a' | 'b'``)."""
    if typing.get_origin(hint) is typing.Literal:
        return " | ".join(repr(value) for value in typing.get_args(hint))
    text = getattr(hint, "__name__", None) if not typing.get_args(hint) else None
    return text or str(hint).replace("typing.", "").replace("NoneType", "None")


def _default(field: dataclasses.Field) -> str:
    if field.default is not dataclasses.MISSING:
        return f"`{field.default!r}`"
    if field.default_factory is not dataclasses.MISSING:
        return f"`{field.default_factory()!r}`"
    return "required"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def config_reference(classes: tuple[type, ...] | None = None) -> str:
    """Return the config reference page: every field of each config class with its type,
    default and help text, in the groups the command line's ``--help`` shows.

    Args:
        classes: the config dataclasses (default: ``TrainerConfig`` and ``SFTConfig``).
    """
    from boltzoo.lightningrl.config import SFTConfig, TrainerConfig, grouped_fields

    classes = classes or (TrainerConfig, SFTConfig)
    lines = [
        "# Configuration reference",
        "",
        "Generated from the config classes' fields (`boltzoo/lightningrl/config.py`): each "
        "field is also a command-line flag of `boltzoo train` / `boltzoo sft` (`env_kwargs` "
        "is `--env-kwargs`; JSON for dicts and lists, `none` unsets an optional field).",
    ]
    for cls in classes:
        hints = typing.get_type_hints(cls)
        lines += ["", f"## `{cls.__name__}`", "", " ".join((cls.__doc__ or "").split())]
        for title, fields in grouped_fields(cls):
            lines += ["", f"### {cls.__name__}: {title}", "", "| field | type | default | help |",
                      "|---|---|---|---|"]  # fmt: skip
            for field in fields:
                cells = (_type_name(hints[field.name]), _default(field), field.metadata["help"])
                lines.append(f"| `{field.name}` | " + " | ".join(map(_cell, cells)) + " |")
    return "\n".join(lines) + "\n"


def _option_row(action: argparse.Action) -> str:
    flags = ", ".join(f"`{flag}`" for flag in action.option_strings) or f"`{action.dest}`"
    if action.choices is not None and not isinstance(action.choices, dict):
        flags += "<br>" + " \\| ".join(f"`{choice}`" for choice in action.choices)
    default = action.default
    shown = "" if default in (None, argparse.SUPPRESS) or action.option_strings == [] else (
        f"`{default!r}`")  # fmt: skip
    help_text = action.help % {"default": default, "prog": ""} if action.help else ""
    return f"| {flags} | {_cell(shown)} | {_cell(help_text)} |"


def cli_reference(parser: argparse.ArgumentParser | None = None) -> str:
    """Return the command line reference page: each subcommand's usage and its options,
    grouped as ``--help`` groups them.

    Args:
        parser: the parser (default: ``boltzoo.cli.build_parser()``).
    """
    if parser is None:
        from boltzoo.cli import build_parser

        parser = build_parser()
    parser.prog = "boltzoo"
    subcommands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    summaries = {action.dest: action.help for action in subcommands._choices_actions}
    lines = ["# Command line reference", "", "Generated from `boltzoo.cli.build_parser()`: "
             "what `boltzoo COMMAND --help` prints, as tables.", "",
             "| command | what it does |", "|---|---|"]  # fmt: skip
    lines += [f"| [`{name}`](#boltzoo-{name}) | {_cell(summaries.get(name) or '')} |"
              for name in subcommands.choices]  # fmt: skip
    for name, sub in subcommands.choices.items():
        sub.prog = f"boltzoo {name}"
        usage = " ".join(sub.format_usage().split())
        lines += ["", f"## boltzoo {name}", "", summaries.get(name) or "", "", "```text",
                  usage, "```"]  # fmt: skip
        for group in sub._action_groups:
            actions = [a for a in group._group_actions if not isinstance(a, argparse._HelpAction)]
            if not actions:
                continue
            lines += ["", f"**{group.title}**", "", "| option | default | help |", "|---|---|---|"]
            lines += [_option_row(action) for action in actions]
    return "\n".join(lines) + "\n"


def _markdown_from_docstring(doc: str) -> str:
    """The env modules' docstrings are markdown but for reST's ``::`` before a literal block."""
    return re.sub(r"::\n", ":\n", doc)


def example_episode(env_id: str) -> str:
    """Return a markdown transcript of one episode the env's oracle plays on the first test
    task: what each agent saw (the chat its model is given) and wrote, then the rewards."""
    import boltzoo
    from boltzoo.agents.scripted import OraclePolicy
    from boltzoo.registration import inspected

    short = env_id.split("/")[-1]
    kwargs = {"split": "test", **EXAMPLE_KWARGS.get(short, {})}
    with inspected(env_id, **kwargs) as env:
        agents, has_oracle = list(env.possible_agents), hasattr(env, "oracle_action")
    if not has_oracle:
        return "None: the env has no oracle (`oracle_action`) to play one."
    oracle = OraclePolicy()
    (episode,) = boltzoo.rollout(env_id, {agent: oracle for agent in agents}, tasks=[0],
                                 progress=False, env_kwargs=kwargs)  # fmt: skip
    if episode.failed:
        raise RuntimeError(f"{env_id}: the oracle's example episode failed: {episode.error}")
    arguments = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
    lines = [f"The env's oracle on task 0 of `boltzoo.make({env_id!r}, {arguments})`, as "
             "the rollout recorded it (`boltzoo rollout --policy oracle`).", ""]  # fmt: skip
    shown: dict[str, list[Any]] = {}  # each agent's chat as far as the page has shown it
    for number, step in enumerate(episode.steps, 1):
        messages, before = step.observation["messages"], shown.get(step.agent, [])
        new = messages[len(before) :] if messages[: len(before)] == before else messages
        shown[step.agent] = [*messages, {"role": "assistant", "content": step.action.text}]
        given = "What its model is given" if not before else "What is new in its chat"
        lines += [f"**Turn {number}: `{step.agent}`**", "", f"{given}:", ""]
        for message in new:
            lines += [f'=== "{message["role"]}"', "", "    ```text"]
            lines += [f"    {line}" for line in str(message["content"]).splitlines()]
            lines += ["    ```", ""]
        lines += ["What it wrote:", "", "```text", step.action.text, "```", ""]
    lines.append(f"Score {episode.score}, success {episode.success}, rewards "
                 f"`{episode.final_rewards}`.")  # fmt: skip
    return "\n".join(lines)


def env_page(env_id: str) -> str:
    """Return an env's page: its module docstring, then an example episode."""
    from boltzoo.registration import inspected

    with inspected(env_id) as env:
        module = importlib.import_module(type(env.unwrapped).__module__)
    doc = _markdown_from_docstring(module.__doc__ or f"{env_id}\n")
    title, _, body = doc.strip().partition("\n")
    return f"# {title.rstrip('.')}\n{body}\n\n## An example episode\n\n{example_episode(env_id)}\n"


def bundled_envs() -> list[str]:
    """Return the ids of the envs boltzoo ships (``boltzoo/...``)."""
    from boltzoo.registration import registered_envs

    return [env_id for env_id in registered_envs() if env_id.startswith("boltzoo/")]


def _repo_link(page: str, target: str) -> tuple[str, list[str]]:
    """Return ``target`` (a link of the repository page ``page``) as the site needs it, and the
    repository files it needs copied in: a file as it is, a folder as a listing page."""
    if re.match(r"^[a-z]+:|^#|^/", target):
        return target, []
    path, _, anchor = target.partition("#")
    source = (ROOT / os.path.dirname(page) / path).resolve()
    if not source.exists() or ROOT not in source.parents:
        return target, []  # left for MkDocs to report
    site_dir = os.path.dirname(REPO_PAGES[page]) or "."
    relative = source.relative_to(ROOT).as_posix()
    if relative in REPO_PAGES:
        linked = os.path.relpath(REPO_PAGES[relative], site_dir)
        return linked + (f"#{anchor}" if anchor else ""), []
    if source.is_dir():
        return os.path.relpath(f"{relative}/index.md", site_dir), [f"{relative}/"]
    return os.path.relpath(relative, site_dir), [relative]


def repo_page(page: str) -> tuple[str, list[str]]:
    """Return a repository markdown page as a site page, and the repository files (or folders,
    ending in ``/``) its links need."""
    needed: list[str] = []

    def rewrite(match: re.Match) -> str:
        target, files = _repo_link(page, match.group(2))
        needed.extend(files)
        return f"{match.group(1)}{target}{match.group(3)}"

    return _LINK.sub(rewrite, (ROOT / page).read_text()), needed


def folder_listing(folder: str) -> str:
    """Return a page listing a repository folder's files (linked) and subfolders."""
    path = ROOT / folder
    lines = [f"# `{folder}`", ""]
    for child in sorted(path.iterdir()):
        name = child.name + ("/" if child.is_dir() else "")
        link = f"{child.name}/index.md" if child.is_dir() else child.name
        lines.append(f"- [`{name}`]({link})")
    return "\n".join(lines) + "\n"


def on_files(files: Any, config: Any) -> Any:
    """MkDocs: add the generated pages and the repository files they link to."""
    from mkdocs.structure.files import File

    def add(uri: str, content: str | bytes) -> None:
        if files.get_file_from_path(uri) is None:
            files.append(File.generated(config, uri, content=content))

    add("reference/config.md", config_reference())
    add("reference/cli.md", cli_reference())
    for env_id in bundled_envs():
        add(f"envs/{env_id.split('/')[-1]}.md", env_page(env_id))
    wanted: list[str] = []
    for page, uri in REPO_PAGES.items():
        text, needed = repo_page(page)
        add(uri, text)
        wanted += needed
    queued = set(wanted)
    while wanted:
        item = wanted.pop()
        if not item.endswith("/"):
            add(item, (ROOT / item).read_bytes())
            continue
        folder = item.rstrip("/")
        add(f"{folder}/index.md", folder_listing(folder))
        children = [p.relative_to(ROOT).as_posix() + ("/" if p.is_dir() else "")
                    for p in (ROOT / folder).iterdir()]  # fmt: skip
        wanted += [child for child in children if child not in queued]
        queued.update(children)
    return files


def on_page_content(html: str, **kwargs: Any) -> str:
    """MkDocs: drop the reST roles the docstrings use (``:class:`X```): shown as code."""
    return re.sub(r":(?:class|meth|func|attr|mod|data|exc|obj):(<code>)", r"\1", html)
