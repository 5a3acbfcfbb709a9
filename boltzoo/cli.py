"""The ``boltzoo`` command line: ``envs``, ``eval``, ``rollout``, ``sft``, ``train``, ``serve``,
``plot``, ``compare``, ``export``.

boltzoo envs
boltzoo eval math-v0 --policy oracle --episodes 50
boltzoo eval math-v0 --policy naive --episodes 200 --split test -e level=medium
boltzoo eval math-v0 --model smollm2-135m --episodes 50
boltzoo eval math-v0 --policy autogen --model smollm2-135m --episodes 20
boltzoo rollout math-v0 --policy oracle --split train --episodes 64 --out demos.jsonl
boltzoo sft math-v0 --demos demos.jsonl --model smollm2-135m --output-dir runs/sft
boltzoo train math-v0 --model smollm2-135m --train-agents '["solver"]' --steps 50 \\
    --output-dir runs/math --eval-every 10
boltzoo serve --model smollm2-135m --port 8000
boltzoo plot runs/math --out runs/math/figures
boltzoo plot runs/math-a runs/math-b --out runs/compare
boltzoo compare runs/math --by level
boltzoo compare runs/sft runs/math --by template
boltzoo export runs/math models/math-solver
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from boltzoo.agents.scripted import SCRIPTED_POLICIES
from boltzoo.episode import Episode
from boltzoo.errors import ConfigError
from boltzoo.lightningrl.config import TrainerConfig, choices, grouped_fields
from boltzoo.lightningrl.curriculum import task_pools
from boltzoo.registration import inspected, registered_envs, resolve_env_id
from boltzoo.rollout import evaluation_tasks, rollout
from boltzoo.tracing import configure_from_env


def parse_env_kwargs(pairs: Sequence[str]) -> dict[str, Any]:
    """Return ``{"key": value}`` from ``key=value`` strings; values are read as JSON when they
    parse (``max_turns=4``, ``agents=["solver","verifier"]``), else kept as strings."""
    kwargs: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"boltzoo: -e takes key=value, got {pair!r}")
        try:
            kwargs[key] = json.loads(value)
        except json.JSONDecodeError:
            kwargs[key] = value
        if isinstance(kwargs[key], list):
            kwargs[key] = tuple(kwargs[key])
    return kwargs


def summarize(episodes: Sequence[Episode]) -> dict[str, float]:
    """Return success rate, mean score and counts over episodes (failed ones count as 0)."""
    n = len(episodes)
    ok = [e for e in episodes if not e.failed]
    return {
        "episodes": n,
        "failed": n - len(ok),
        "success_rate": sum(bool(e.success) for e in ok) / n if n else 0.0,
        "mean_score": sum(e.score or 0.0 for e in ok) / n if n else 0.0,
        "steps": sum(len(e.steps) for e in episodes),
        "response_tokens": sum(
            call.num_response_tokens or 0
            for e in episodes
            for s in e.steps
            for call in (s.action.inner_calls or [s.action])
        ),
    }


def success_by(episodes: Sequence[Episode], tasks: Sequence[Any], field: str) -> dict[str, Any]:
    """Return ``{value: {"episodes": n, "success_rate": r}}`` over the values of a task
    attribute (``template``, ``level``, ``db_id``, ``hops``...), hardest first.

    Args:
        episodes: Played episodes; each names its task by ``task_index``.
        tasks: The env's task list (``env.unwrapped.tasks``) the indices refer to.
        field: The attribute of the tasks to group by.

    Raises:
        ValueError: When the tasks have no such attribute (the message lists theirs).
    """
    pools = task_pools(tasks, field)
    return _success_by_value(episodes, [pools[e.task_index] for e in episodes])


def success_by_info(episodes: Sequence[Episode], key: str) -> dict[str, Any]:
    """Return ``{value: {"episodes": n, "success_rate": r}}`` over the values of ``key`` in each
    episode's last info (what the env reports at the end: rag-v0's ``supporting_retrieved``,
    math-v0's ``tool_calls``...), hardest first: where the failures are, not only how many. An
    episode whose last step lacks the key (a failed one) counts under ``"-"``.

    Raises:
        ValueError: When no episode's last info has the key (the message lists the keys).
    """
    last = [e.steps[-1].info if e.steps else {} for e in episodes]
    if last and not any(key in info for info in last):
        keys = sorted({k for info in last for k in info})
        raise ValueError(f"no episode's last info has {key!r}; theirs: {', '.join(keys)}")
    return _success_by_value(episodes, [str(info.get(key, "-")) for info in last])


def _success_by_value(episodes: Sequence[Episode], values: Sequence[str]) -> dict[str, Any]:
    """Return the success of the episodes grouped by their ``values`` (one each), hardest first."""
    groups: dict[str, list[Episode]] = {}
    for episode, value in zip(episodes, values, strict=True):
        groups.setdefault(value, []).append(episode)
    rows = {value: summarize(group) for value, group in groups.items()}
    order = sorted(rows, key=lambda value: (rows[value]["success_rate"], value))
    return {
        value: {"episodes": rows[value]["episodes"], "success_rate": rows[value]["success_rate"]}
        for value in order
    }


# the frameworks whose bundled agents --policy plays (TrainerConfig.framework's list)
FRAMEWORK_POLICIES = tuple(v for v in choices(TrainerConfig)["framework"] if v is not None)


def _load_model_policy(args: argparse.Namespace, model: str) -> Any:
    from boltzoo.agents.models import load_policy

    return load_policy(
        model,
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        top_p=args.top_p,
        seed=args.seed,
    )


def _framework_players(
    args: argparse.Namespace, env_id: str, agents: Sequence[str]
) -> tuple[dict[str, Any], str, list[Any]]:
    """Return a bundled framework agent per env agent, the run's label and the started
    gateways behind them: ``--model`` behind one, and with ``--oracle`` the env's oracle behind
    another, answering the calls of the agents or graph nodes ``--oracle`` names (all when it
    names none), so the episodes are demonstrations in the framework's own tokens."""
    from boltzoo.agents import examples, frameworks
    from boltzoo.agents.gateway import Gateway

    model = args.model or "smollm2-135m"
    adapter, example = frameworks.ADAPTERS[args.policy], examples.EXAMPLES[args.policy]
    builders = {agent: example(env_id, agent) for agent in agents}
    nodes = {agent: tuple(getattr(build, "nodes", ())) for agent, build in builders.items()}
    callers = [name for agent in agents for name in nodes[agent] or (agent,)]
    oracle_for: set[str] = set()
    if args.oracle == "*":
        oracle_for = set(callers)
    elif args.oracle is not None:
        oracle_for = {name.strip() for name in args.oracle.split(",") if name.strip()}
        unknown = sorted(oracle_for - set(callers))
        if unknown or not oracle_for:
            raise ConfigError(
                f"--oracle {args.oracle!r}: name agents or graph nodes that call the model, "
                f"comma-separated, from {', '.join(callers)} (or give --oracle alone: all)"
            )
    model_gateway = oracle_gateway = None
    if set(callers) - oracle_for:
        model_gateway = Gateway(_load_model_policy(args, model)).start()
    if oracle_for:
        from transformers import AutoTokenizer

        from boltzoo.agents.models import resolve_model
        from boltzoo.agents.scripted import framework_oracle

        tokenizer = AutoTokenizer.from_pretrained(resolve_model(model))
        oracle_gateway = Gateway(framework_oracle(tokenizer)).start()

    def gateway_of(name: str) -> Any:
        return oracle_gateway if name in oracle_for else model_gateway

    policies = {}
    for agent, build in builders.items():
        if nodes[agent]:  # a graph: each node calls the gateway of whoever answers it
            main = model_gateway or oracle_gateway
            node_gateways = {n: gateway_of(n) for n in nodes[agent] if gateway_of(n) is not main}
            policies[agent] = adapter(build, main, node_gateways=node_gateways)
        else:
            policies[agent] = adapter(build, gateway_of(agent))
    if oracle_for == set(callers):
        label = f"{args.policy}:oracle"
    elif oracle_for:
        label = f"{args.policy}:{model}+oracle({','.join(sorted(oracle_for))})"
    else:
        label = f"{args.policy}:{model}"
    return policies, label, [g for g in (model_gateway, oracle_gateway) if g is not None]


def play(args: argparse.Namespace) -> tuple[list[Episode], dict[str, Any]]:
    """Return the episodes of ``args.policy`` / ``args.model`` on the env's split, and their
    summary (what ``boltzoo eval`` prints and ``boltzoo rollout`` records)."""
    env_id = resolve_env_id(args.env)
    env_kwargs = parse_env_kwargs(args.env_arg)
    env_kwargs.setdefault("split", args.split)
    with inspected(env_id, **env_kwargs) as env:
        agents, env_tasks = env.possible_agents, env.tasks
    num_tasks = len(env_tasks)
    if args.by:  # a wrong field fails now, not after every episode has been played
        try:
            task_pools(env_tasks, args.by)
        except ValueError as error:
            raise SystemExit(f"boltzoo: --by: {error}") from None
    gateways: list[Any] = []
    program = None
    program_given = [
        flag
        for flag, value in (
            ("--agent-command", args.agent_command),
            ("--agent-service", args.agent_service),
            ("--agent-url", args.agent_url),
        )
        if value is not None
    ]
    if len(program_given) > 1:
        raise SystemExit(f"boltzoo: {' and '.join(program_given)}: give one agent program")
    if args.oracle is not None and args.policy not in FRAMEWORK_POLICIES:
        raise ConfigError(
            "--oracle plays the env's oracle through a framework --policy "
            f"({', '.join(FRAMEWORK_POLICIES)}); without one, use --policy oracle"
        )
    if program_given:
        # An agent program plays every agent; its model calls go to --model through a gateway.
        from boltzoo.agents.programs import agent_program

        model = args.model or "smollm2-135m"
        program = agent_program(
            _load_model_policy(args, model),
            command=args.agent_command,
            service=args.agent_service,
            push_url=args.agent_url,
            timeout_s=args.agent_timeout_s,
            concurrency=args.agent_concurrency,
            claim_timeout_s=args.agent_claim_timeout_s,
            api_key=args.api_key or os.environ.get("BOLTZOO_API_KEY"),
        )
        if args.agent_service is not None:
            print(f"agent services claim turns at {program.claim_url}", file=sys.stderr)
        policies, label = {agent: program for agent in agents}, f"{program.kind}:{model}"
    elif args.policy in FRAMEWORK_POLICIES:
        policies, label, gateways = _framework_players(args, env_id, agents)
    elif args.model:
        policy = _load_model_policy(args, args.model)
        policies, label = {agent: policy for agent in agents}, args.model
    else:
        policy = SCRIPTED_POLICIES[args.policy]()
        policies, label = {agent: policy for agent in agents}, args.policy
    count = args.episodes if args.episodes is not None else num_tasks
    # The same tasks as a training run's evaluation of that size (spread over the split), so
    # runs compare like with like; more episodes than tasks go round the split again.
    if count < num_tasks:
        tasks = evaluation_tasks(num_tasks, count)
    else:
        tasks = [i % num_tasks for i in range(count)]
    started = time.perf_counter()
    try:
        episodes = rollout(
            env_id,
            policies,
            tasks=tasks,
            seed=args.seed,
            progress=not args.quiet,
            workers=args.workers,
            ray_address=args.ray_address,
            env_kwargs=env_kwargs,
        )
    finally:
        for gateway in gateways:
            gateway.close()
        if program is not None:
            program.close()
    elapsed = time.perf_counter() - started
    summary = summarize(episodes)
    summary.update(
        env=env_id,
        policy=label,
        split=env_kwargs["split"],
        seconds=round(elapsed, 3),
        steps_per_second=round(summary["steps"] / elapsed, 1) if elapsed > 0 else 0.0,
        tokens_per_second=round(summary["response_tokens"] / elapsed, 1) if elapsed > 0 else 0.0,
    )
    if args.by:
        summary["by"] = {args.by: success_by(episodes, env_tasks, args.by)}
    return episodes, summary


def _add_by_info(args: argparse.Namespace, episodes: list[Episode], summary: dict) -> None:
    """Add ``--by-info``'s breakdown to ``summary["by"]`` (after a rollout has written the
    episodes: a key no episode has fails then, and loses nothing)."""
    if args.by_info:
        try:
            rows = success_by_info(episodes, args.by_info)
        except ValueError as error:
            raise SystemExit(f"boltzoo: --by-info: {error}") from None
        summary.setdefault("by", {})[f"info:{args.by_info}"] = rows


def _print_summary(args: argparse.Namespace, summary: dict[str, Any]) -> None:
    if args.json:
        print(json.dumps(summary))
        return
    print(
        f"{summary['env']} [{summary['policy']}] split={summary['split']} "
        f"episodes={summary['episodes']}: success {summary['success_rate']:.1%}, mean score "
        f"{summary['mean_score']:.3f}, failed {summary['failed']}, "
        f"{summary['steps_per_second']} env steps/s, {summary['tokens_per_second']} tokens/s"
    )
    for field, rows in summary.get("by", {}).items():
        width = max(len(field), *(len(value) for value in rows))
        print(f"{field:<{width}}  episodes  success")
        for value, row in rows.items():
            print(f"{value:<{width}}  {row['episodes']:>8}  {row['success_rate']:>7.1%}")


def cmd_eval(args: argparse.Namespace) -> int:
    episodes, summary = play(args)
    _add_by_info(args, episodes, summary)
    _print_summary(args, summary)
    return 0


def cmd_rollout(args: argparse.Namespace) -> int:
    from boltzoo.episode import save_episodes

    episodes, summary = play(args)
    save_episodes(args.out, episodes)
    _add_by_info(args, episodes, summary)
    _print_summary(args, summary)
    if not args.json:
        print(f"wrote {len(episodes)} episodes to {args.out}")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from boltzoo.agents.gateway import Gateway

    policy = _load_model_policy(args, args.model)
    with Gateway(
        policy,
        host=args.host,
        port=args.port,
        api_key=args.api_key,
        record_to=args.record_to,
        record_ttl_s=args.record_ttl_s,
        max_pending=args.max_pending,
        request_timeout_s=args.request_timeout_s,
    ) as gateway:
        print(f"serving {gateway.model_name} at {gateway.base_url} (Ctrl-C stops)", flush=True)
        # Ctrl-C and SIGTERM (docker stop, systemd) stop it cleanly; set here, as a process
        # started in the background of a script inherits SIGINT ignored
        stop = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
        while not stop.wait(timeout=0.5):
            pass
    return 0


def _config_flags(parser: argparse.ArgumentParser, config_class: type) -> None:
    """Add one flag per field of a config dataclass (``--tasks-per-step``), with its help text;
    ``env`` and ``model`` are the command's own arguments. A flag's value is parsed as its field's
    type says (a bad value is argparse's one-line error, exit 2, before anything loads); a flag
    left out leaves the field alone, and ``none`` sets an optional one to None."""
    allowed = choices(config_class)
    for title, fields in grouped_fields(config_class):  # the groups in order, the core first
        group = parser.add_argument_group(title)
        for f in fields:
            if f.name not in ("env", "model"):  # (the command's own arguments)
                _add_config_flag(group, f, allowed)


def _add_config_flag(parser: Any, f: Any, allowed: dict[str, tuple[Any, ...]]) -> None:
    flag = "--" + f.name.replace("_", "-")
    given = {"default": argparse.SUPPRESS, "help": f.metadata["help"]}
    if f.name in allowed:  # one of the config's own list
        values = [v for v in allowed[f.name] if v is not None]
        parser.add_argument(flag, choices=values, **given)
    elif f.type == "bool":  # --flag alone means true; --flag false turns it off
        parser.add_argument(flag, type=_parse_bool, nargs="?", const=True, **given)
    elif f.type in ("int", "float", "int | None", "float | None"):
        parser.add_argument(flag, type=_number_parser(f.type), **given)
    elif f.type in ("str", "str | None"):  # taken as written: --output-dir 2024 is a folder
        parser.add_argument(flag, type=str, **given)
    elif f.type.startswith("dict"):
        parser.add_argument(flag, type=_json_parser(dict, "a JSON object"), **given)
    elif f.type.startswith("str | dict"):  # a folder as written, or a JSON object
        parse = _json_parser(dict, "a JSON object")
        parser.add_argument(flag, type=lambda v: parse(v) if v.startswith("{") else v, **given)
    elif f.type.startswith("list"):  # a JSON list (or one string, where the field takes one)
        parse = _json_parser(list, "a JSON list", text="| str" in f.type)
        parser.add_argument(flag, type=parse, **given)
    else:
        raise TypeError(f"no command-line parser for {f.name}: {f.type}")


def _bounded(kind: type, low: float, high: float = math.inf, *, low_allowed: bool = True) -> Any:
    """An argparse type: a ``kind`` number within ``[low, high]`` (``(low, high]`` when ``low``
    itself is not allowed); anything else is argparse's one-line error."""

    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            value = math.nan
        if not ((value >= low if low_allowed else value > low) and value <= high):
            bound = f"{'at least' if low_allowed else 'above'} {low:g}"
            bound += f" and at most {high:g}" if high < math.inf else ""
            words = "a number" if kind is float else "a whole number"
            raise argparse.ArgumentTypeError(f"expected {words} {bound}, got {text!r}")
        return value

    return parse


def _number_parser(annotation: str) -> Any:
    kind = float if annotation.startswith("float") else int
    optional = annotation.endswith("| None")

    def parse(text: str) -> int | float | None:
        if optional and text.lower() in ("none", "null"):
            return None
        try:
            return kind(text)
        except ValueError:
            words = "a number" if kind is float else "a whole number"
            raise argparse.ArgumentTypeError(
                f"expected {words}{' or none' if optional else ''}, got {text!r}"
            ) from None

    return parse


def _json_parser(kind: type, words: str, *, text: bool = False) -> Any:
    def parse(value: str) -> Any:
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError as error:
            if text:
                return value
            raise argparse.ArgumentTypeError(f"expected {words}: {error}") from None
        if isinstance(parsed, str) and text:
            return parsed
        if not isinstance(parsed, kind):
            raise argparse.ArgumentTypeError(f"expected {words}, got {value!r}")
        return parsed

    return parse


def _given_config(args: argparse.Namespace, config_class: type) -> dict[str, Any]:
    """Return the config fields given on the command line (flags left out keep the defaults)."""
    import dataclasses

    given = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(config_class)
        if f.name not in ("env", "model") and hasattr(args, f.name)
    }
    given["env"] = resolve_env_id(args.env)
    if args.model is not None:
        given["model"] = args.model
    return given


def _parse_bool(text: str) -> bool:
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _print_held_out(run_dir: str) -> None:
    """Print a run's held-out success at its first and last evaluation, and the two compared
    task by task when both logged their outcomes."""
    from boltzoo.lightningrl.report import paired_outcomes, read_metrics

    evaluations = [m for m in read_metrics(run_dir) if "eval_success_rate" in m]
    if evaluations:
        first, last = evaluations[0], evaluations[-1]
        print(
            f"held-out success: {first['eval_success_rate']:.1%} at step {first['step']} -> "
            f"{last['eval_success_rate']:.1%} at step {last['step']} "
            f"({100 * (last['eval_success_rate'] - first['eval_success_rate']):+.1f} points)"
        )
        if first is not last and all("eval_right" in m for m in (first, last)):
            print(f"task by task: {paired_outcomes(first, last)}")


def _overwrite_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="start afresh in an --output-dir that holds a run: its metrics and checkpoints are "
        "deleted first (else such a folder is refused)",
    )


def _claim_run_folder(config: Any, given: dict[str, Any], args: argparse.Namespace) -> None:
    """Check (or with --overwrite clear) the run folder, and read the checkpoints the run will
    start from, before anything heavy starts: a bad folder is one line and exit 2, not a
    traceback after the model loaded. A warm start's model and LoRA settings are taken."""
    from pathlib import Path

    from boltzoo.agents.models import resolve_model
    from boltzoo.errors import RunFolderError
    from boltzoo.lightningrl.checkpoint import (
        adopt_weight_settings,
        check_checkpoint,
        check_run_folder,
        clear_run_folder,
        latest_checkpoint,
    )

    output_dir = Path(config.output_dir)
    resume = getattr(args, "resume", False)
    if resume and args.overwrite:
        raise ConfigError("--resume continues a run, --overwrite deletes it: give one of them")
    if args.overwrite and output_dir.is_dir():
        clear_run_folder(output_dir)
    check_run_folder(output_dir, resume=resume)
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise RunFolderError(f"output_dir {str(output_dir)!r} cannot be made: {error}") from None
    if not os.access(output_dir, os.W_OK):
        raise RunFolderError(f"output_dir {str(output_dir)!r} is not writable")
    if config.init_from:
        for folder in adopt_weight_settings(config, config.init_from, given=set(given)):
            check_checkpoint(folder)
    resolve_model(config.model)  # the model is found (it loads later)
    if resume and (folder := latest_checkpoint(output_dir / "checkpoints")) is not None:
        check_checkpoint(folder)


def cmd_train(args: argparse.Namespace) -> int:
    from pathlib import Path

    from boltzoo.lightningrl.trainer import Trainer

    given = _given_config(args, TrainerConfig)
    saved = Path(given.get("output_dir", TrainerConfig.output_dir)) / "config.json"
    if args.resume and saved.exists():
        # The saved config, with the flags given on this command line on top.
        config = TrainerConfig.load(saved, **given)
    else:
        config = TrainerConfig(**given)
    _claim_run_folder(config, given, args)
    trainer = Trainer(config)
    if args.resume and not trainer.resume():
        print("boltzoo: nothing to resume in", config.output_dir, "- starting afresh", flush=True)
    config.save(Path(config.output_dir) / "config.json")
    with trainer:
        history = trainer.train()
    if history:
        last = history[-1]
        print(
            f"step {last['step']}: reward {last['reward']:.3f}, score {last['score']:.3f}, "
            f"{last['train_seconds'] / 60:.1f} min of training"
        )
    _print_held_out(config.output_dir)
    return 0


def cmd_sft(args: argparse.Namespace) -> int:
    from pathlib import Path

    from boltzoo.lightningrl.config import SFTConfig
    from boltzoo.lightningrl.sft import SFTTrainer

    given = _given_config(args, SFTConfig)
    saved = Path(given.get("output_dir", SFTConfig.output_dir)) / "config.json"
    if args.resume and saved.exists():  # the saved config, with the flags given here on top
        config = SFTConfig.load(saved, **given)
    else:
        config = SFTConfig(**given)
    _claim_run_folder(config, given, args)
    with SFTTrainer(config) as trainer:  # (a framework's gateways stop on leaving)
        if args.resume and not trainer.resume():
            print("boltzoo: nothing to resume in", config.output_dir, "- starting", flush=True)
        config.save(Path(config.output_dir) / "config.json")
        history = trainer.train()
    if history:
        print(
            f"step {history[-1]['step']}: loss {history[-1]['sft_loss']:.3f}, "
            f"{history[-1]['train_seconds'] / 60:.1f} min of training"
        )
    if config.eval_tasks:
        _print_held_out(config.output_dir)
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from pathlib import Path

    from boltzoo.lightningrl.report import (
        compare_runs,
        paired_outcomes,
        plot_run,
        read_metrics,
        run_labels,
    )

    runs = args.run_dir
    if len(runs) > 1 and args.out is None:
        print("boltzoo: --out is required to compare several runs", file=sys.stderr)
        return 2
    try:
        labels = run_labels(runs, args.labels)
        if len(runs) == 1:
            paths = plot_run(runs[0], args.out)
        else:
            paths = [compare_runs(runs, Path(args.out) / "compare.png", labels, args.window)]
            metrics = [read_metrics(run) for run in runs]
    except (FileNotFoundError, ValueError) as error:
        print(f"boltzoo: {error}", file=sys.stderr)
        return 2
    for path in paths:
        print(path)
    if len(runs) > 1:
        # The held-out figures side by side, at every step any run evaluated.
        held_out = [
            {m["step"]: m["eval_success_rate"] for m in rows if "eval_success_rate" in m}
            for rows in metrics
        ]
        print("held-out success")
        print("\t".join(["step", *labels]))
        for step in sorted(set().union(*held_out)):
            cells = [f"{h[step]:.1%}" if step in h else "" for h in held_out]
            print("\t".join([str(step), *cells]))
        # Each run against the first, task by task, at the last step both evaluated.
        outcomes = [
            {m["step"]: m for m in rows if "eval_right" in m and "eval_task_ids" in m}
            for rows in metrics
        ]
        for label, other in zip(labels[1:], outcomes[1:], strict=True):
            common = set(outcomes[0]) & set(other)
            if common:
                step = max(common)
                paired = paired_outcomes(outcomes[0][step], other[step])
                print(f"{label} against {labels[0]} at step {step}: {paired}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from boltzoo.lightningrl.report import compare_evaluations

    try:
        result = compare_evaluations(
            args.before_run, args.after_run, args.before_step, args.after_step, args.by
        )
    except (FileNotFoundError, ValueError) as error:
        print(f"boltzoo: {error}", file=sys.stderr)
        return 2
    paired = result["paired"]
    if args.json:
        print(json.dumps(result | {"paired": asdict(paired) | {"p_value": paired.p_value}}))
        return 0
    for side in ("before", "after"):
        row = result[side]
        print(f"{side}: {row['run']} at step {row['step']}: {row['success_rate']:.1%}")
    print(f"task by task: {paired}")
    changed = [g for g in result.get("groups", []) if g["right_before"] != g["right_after"]]
    if changed:
        print(f"{args.by} whose tasks changed (right before -> after, of tasks):")
        width = max(len(g["value"]) for g in changed)
        for g in changed:
            before, after = g["right_before"], g["right_after"]
            print(f"  {g['value']:<{width}}  {before} -> {after} of {g['tasks']}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from boltzoo.lightningrl.policies import export_run

    try:
        print(export_run(args.run_dir, args.out_dir))
    except FileNotFoundError as error:
        print(f"boltzoo: {error}", file=sys.stderr)
        return 2
    return 0


def _add_env_arg(parser: argparse.ArgumentParser) -> None:
    """Add ``-e KEY=VALUE``: the env's keyword arguments (read by :func:`parse_env_kwargs`)."""
    parser.add_argument(
        "-e",
        "--env-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="env keyword argument, e.g. -e level=medium -e max_turns=4 (repeatable)",
    )


def _play_arguments(parser: argparse.ArgumentParser, split: str) -> None:
    """Add the arguments of ``boltzoo eval`` and ``boltzoo rollout``: who plays, on what."""
    parser.add_argument("env", help="env id, e.g. math-v0 or boltzoo/math-v0")
    parser.add_argument(
        "--policy",
        choices=[*sorted(SCRIPTED_POLICIES), *FRAMEWORK_POLICIES],
        default="oracle",
        help="a scripted policy, or a bundled framework agent over --model (via the gateway)",
    )
    parser.add_argument(
        "--oracle",
        nargs="?",
        const="*",
        default=None,
        metavar="AGENTS",
        help="with a framework --policy: the env's oracle answers the model calls (from each "
        "call's task), so the episodes are demonstrations in the framework's own tokens "
        "(--model's tokenizer) for boltzoo sft --framework; AGENTS (comma-separated agents or "
        "graph nodes, e.g. --oracle checker) limits it to those, --model answering the rest",
    )
    parser.add_argument(
        "--model",
        default=None,
        help="a model for every agent: smollm2-135m or a local transformers folder (with a "
        "scripted --policy, the model replaces it)",
    )
    parser.add_argument("--max-new-tokens", type=_bounded(int, 1), default=256)
    parser.add_argument(
        "--temperature", type=_bounded(float, 0), default=0.0, help="0: greedy decoding"
    )
    parser.add_argument("--top-p", type=_bounded(float, 0, 1, low_allowed=False), default=1.0)
    parser.add_argument(
        "--episodes",
        type=_bounded(int, 1),
        default=None,
        help="default: every task of the split; fewer are spread evenly over it",
    )
    parser.add_argument("--split", default=split)
    parser.add_argument("--seed", type=int, default=0)
    _add_env_arg(parser)
    parser.add_argument(
        "--workers",
        type=_bounded(int, 0),
        default=0,
        help="play on this many Ray workers (boltzoo[ray]; 0: in this process)",
    )
    parser.add_argument(
        "--ray-address",
        default=None,
        help="the Ray cluster to join (auto or host:port); default: a local Ray on 127.0.0.1",
    )
    parser.add_argument(
        "--by",
        default=None,
        metavar="FIELD",
        help="also give success per value of a task field, hardest first (template, level, "
        "db_id, hops...)",
    )
    parser.add_argument(
        "--by-info",
        default=None,
        metavar="KEY",
        help="also give success per value of a key of the episodes' last info, hardest first "
        "(rag-v0's supporting_retrieved: retrieval misses apart from wrong readings)",
    )
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    program = parser.add_argument_group(
        "agent programs", "every agent played by a program of its own, calling --model"
    )
    program.add_argument(
        "--agent-command",
        default=None,
        metavar="CMD",
        help="run this command line once per agent turn (any language; see "
        "boltzoo/agents/programs.py for its environment variables)",
    )
    program.add_argument(
        "--agent-service",
        nargs="?",
        const="127.0.0.1:0",
        default=None,
        metavar="HOST:PORT",
        help="wait for agent services to claim turns (POST /rollouts/claim) at HOST:PORT "
        "(default a free port on 127.0.0.1; another host needs --api-key)",
    )
    program.add_argument(
        "--agent-url", default=None, metavar="URL", help="POST each turn to the service at URL"
    )
    program.add_argument(
        "--agent-timeout-s",
        type=_bounded(float, 0, low_allowed=False),
        default=120.0,
        help="a turn running longer (a service: silent longer) is killed and its episode fails",
    )
    program.add_argument(
        "--agent-concurrency", type=_bounded(int, 1), default=16, help="agent turns running at once"
    )
    program.add_argument(
        "--agent-claim-timeout-s",
        type=float,
        default=600.0,
        help="a turn no service claims within this fails",
    )
    program.add_argument(
        "--api-key",
        default=None,
        help="the key services send to claim turns (default: $BOLTZOO_API_KEY)",
    )


class _Parser(argparse.ArgumentParser):
    """argparse, with a bad argument said in one line (not the usage of 60 flags above it)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """Return the ``boltzoo`` argument parser."""
    from boltzoo.lightningrl.config import SFTConfig

    parser = _Parser(
        prog="boltzoo",
        description="LLM agent workflows as PettingZoo envs, and LightningRL to train them",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("envs", help="list the registered envs")

    check = sub.add_parser(
        "check", help="check an env against boltzoo's env contract (boltzoo.envs.check_env)"
    )
    check.add_argument("env", help="env id, or module:callable")
    check.add_argument(
        "--episodes", type=_bounded(int, 1), default=4, help="tasks each scripted policy plays"
    )
    _add_env_arg(check)

    ev = sub.add_parser("eval", help="evaluate a policy on an env's tasks")
    _play_arguments(ev, split="test")

    ro = sub.add_parser(
        "rollout",
        help="play a policy on an env's tasks and record the episodes (demonstrations for sft)",
    )
    _play_arguments(ro, split="train")
    ro.add_argument("--out", required=True, help="the JSONL file of episodes to write")

    train = sub.add_parser("train", help="train agents of an env with LightningRL")
    train.add_argument("env", help="env id, e.g. math-v0")
    train.add_argument("--model", default=None, help="smollm2-135m or a local model folder")
    train.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --output-dir (flags given here override its saved config)",
    )
    _overwrite_flag(train)
    _config_flags(train, TrainerConfig)

    sft = sub.add_parser(
        "sft", help="warm start: fine-tune agents on recorded demonstrations (before RL)"
    )
    sft.add_argument("env", help="env id, e.g. math-v0")
    sft.add_argument("--model", default=None, help="smollm2-135m or a local model folder")
    sft.add_argument(
        "--resume",
        action="store_true",
        help="continue the warm start in --output-dir from its last checkpoint (flags given "
        "here override its saved config)",
    )
    _overwrite_flag(sft)
    _config_flags(sft, SFTConfig)

    serve = sub.add_parser("serve", help="serve a model behind the OpenAI-compatible gateway")
    serve.add_argument("--model", default="smollm2-135m")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=_bounded(int, 0, 65535), default=8000)
    serve.add_argument("--api-key", default=None)
    serve.add_argument("--max-new-tokens", type=_bounded(int, 1), default=256)
    serve.add_argument("--temperature", type=_bounded(float, 0), default=1.0)
    serve.add_argument("--top-p", type=_bounded(float, 0, 1, low_allowed=False), default=1.0)
    serve.add_argument("--seed", type=int, default=0)
    serve.add_argument(
        "--record-to",
        default=None,
        help="append every call (with its token ids) to this JSON-lines file instead of keeping it",
    )
    serve.add_argument(
        "--record-ttl-s",
        type=_bounded(float, 0, low_allowed=False),
        default=3600.0,
        help="seconds a call stays readable at GET /sessions/ID (without --record-to)",
    )
    serve.add_argument(
        "--max-pending",
        type=_bounded(int, 1),
        default=4096,
        help="requests waiting or in the model beyond this get 429 (with Retry-After)",
    )
    serve.add_argument(
        "--request-timeout-s",
        type=_bounded(float, 0, low_allowed=False),
        default=600.0,
        help="beyond it, a request gets 504",
    )

    plot = sub.add_parser(
        "plot",
        help="draw a training run's learning curves as PNG files, or several runs on one figure",
    )
    plot.add_argument(
        "run_dir", nargs="+", help="a training run's --output-dir; several: compare.png of them all"
    )
    plot.add_argument(
        "--out", default=None, help="folder for the figures (default: RUN_DIR; needed for several)"
    )
    plot.add_argument("--labels", nargs="+", default=None, help="names of the runs in compare.png")
    plot.add_argument(
        "--window",
        type=_bounded(int, 1),
        default=10,
        help="compare.png: steps in the training-success mean",
    )

    compare = sub.add_parser(
        "compare",
        help="compare two held-out evaluations task by task (McNemar), optionally per task field",
    )
    compare.add_argument("before_run", help="the run of the first evaluation")
    compare.add_argument(
        "after_run", nargs="?", default=None, help="the run of the second (default: the same)"
    )
    compare.add_argument(
        "--before-step", type=int, default=None, help="default: the first run's first evaluation"
    )
    compare.add_argument(
        "--after-step", type=int, default=None, help="default: the second run's last evaluation"
    )
    compare.add_argument(
        "--by", default=None, metavar="FIELD", help="also per value of a task field (template...)"
    )
    compare.add_argument("--json", action="store_true", help="print the comparison as JSON")

    export = sub.add_parser(
        "export", help="save a run's latest checkpoint as a plain transformers model folder"
    )
    export.add_argument("run_dir", help="a training run's --output-dir")
    export.add_argument("out_dir", help="the model folder to write")
    return parser


def cmd_check(args: argparse.Namespace) -> int:
    """``boltzoo check``: run check_env on an env; print what passed, or every problem."""
    from boltzoo.envs.contract import EnvCheckError, check_env

    env_id = resolve_env_id(args.env)
    try:
        passed = check_env(env_id, episodes=args.episodes, **parse_env_kwargs(args.env_arg))
    except EnvCheckError as error:
        print(f"boltzoo: {error}", file=sys.stderr)
        return 1
    print("\n".join([f"{env_id} keeps the env contract:", *(f"  ok {line}" for line in passed)]))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``boltzoo`` command line; return its exit status."""
    args = build_parser().parse_args(argv)
    configure_from_env()
    # "module:callable" env ids import from the working directory, as `python -m` and uvicorn
    # do (Ray workers started from here inherit this path)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    if args.command == "envs":
        print("\n".join(registered_envs()))
        return 0
    try:
        commands = {
            "check": cmd_check,
            "serve": cmd_serve,
            "train": cmd_train,
            "sft": cmd_sft,
            "eval": cmd_eval,
            "rollout": cmd_rollout,
            "plot": cmd_plot,
            "compare": cmd_compare,
            "export": cmd_export,
        }
        return commands[args.command](args)
    except Exception as error:  # a clear one-line message, not a traceback, for user errors
        from boltzoo.errors import BoltzooError

        if isinstance(error, BoltzooError):
            print(f"boltzoo: {error}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
