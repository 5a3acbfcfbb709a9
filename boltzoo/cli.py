"""The ``boltzoo`` command line: ``envs``, ``eval``, ``train``, ``serve``, ``plot``, ``export``.

boltzoo envs
boltzoo eval math-v0 --policy oracle --episodes 50
boltzoo eval math-v0 --policy naive --episodes 200 --split test -e level=medium
boltzoo eval math-v0 --model smollm2-135m --episodes 50
boltzoo eval math-v0 --policy autogen --model smollm2-135m --episodes 20
boltzoo train math-v0 --model smollm2-135m --train-agents '["solver"]' --steps 50 \\
    --output-dir runs/math --eval-every 10
boltzoo serve --model smollm2-135m --port 8000
boltzoo plot runs/math --out runs/math/figures
boltzoo export runs/math models/math-solver
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from boltzoo.agents.scripted import SCRIPTED_POLICIES
from boltzoo.episode import Episode
from boltzoo.lightningrl.rollout import evaluation_tasks, rollout
from boltzoo.registration import make, registered_envs, resolve_env_id
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


FRAMEWORK_POLICIES = ("autogen", "openai-agents")


def _load_model_policy(args: argparse.Namespace, model: str) -> Any:
    from boltzoo.agents.models import load_policy

    return load_policy(
        model,
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        top_p=args.top_p,
        seed=args.seed,
    )


def cmd_eval(args: argparse.Namespace) -> int:
    env_id = resolve_env_id(args.env)
    env_kwargs = parse_env_kwargs(args.env_arg)
    env_kwargs.setdefault("split", args.split)
    env = make(env_id, **env_kwargs)
    agents = env.unwrapped.possible_agents
    num_tasks = env.unwrapped.num_tasks
    gateway = None
    if args.policy in FRAMEWORK_POLICIES:
        # A framework agent per workflow agent, all talking to the model through one gateway.
        from boltzoo.agents import examples, frameworks
        from boltzoo.agents.gateway import Gateway

        gateway = Gateway(_load_model_policy(args, args.model or "smollm2-135m")).start()
        adapter, example = {
            "autogen": (frameworks.AutoGenPolicy, examples.autogen_assistant),
            "openai-agents": (frameworks.OpenAIAgentsPolicy, examples.openai_agents_assistant),
        }[args.policy]
        policies = {agent: adapter(example(env_id, agent), gateway) for agent in agents}
        label = f"{args.policy}:{args.model or 'smollm2-135m'}"
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
            env_id, policies, tasks=tasks, seed=args.seed, progress=not args.quiet, **env_kwargs
        )
    finally:
        if gateway is not None:
            gateway.close()
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
    if args.json:
        print(json.dumps(summary))
    else:
        print(
            f"{env_id} [{label}] split={summary['split']} episodes={summary['episodes']}: "
            f"success {summary['success_rate']:.1%}, mean score {summary['mean_score']:.3f}, "
            f"failed {summary['failed']}, {summary['steps_per_second']} env steps/s, "
            f"{summary['tokens_per_second']} tokens/s"
        )
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from boltzoo.agents.gateway import Gateway

    policy = _load_model_policy(args, args.model)
    with Gateway(policy, host=args.host, port=args.port, api_key=args.api_key) as gateway:
        print(f"serving {gateway.model_name} at {gateway.base_url} (Ctrl-C stops)", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
    return 0


def _config_flags(parser: argparse.ArgumentParser) -> None:
    """Add one flag per TrainerConfig field (``--tasks-per-step``), with its help text."""
    import dataclasses

    from boltzoo.lightningrl.config import TrainerConfig

    for f in dataclasses.fields(TrainerConfig):
        if f.name in ("env", "model"):
            continue
        flag = "--" + f.name.replace("_", "-")
        kind = type(f.default) if f.default is not dataclasses.MISSING else None
        if kind is bool:
            parser.add_argument(flag, type=_parse_bool, default=None, help=f.metadata["help"])
        elif kind in (int, float):
            parser.add_argument(flag, type=kind, default=None, help=f.metadata["help"])
        else:  # str, optional numbers, lists and dicts: JSON when it parses, else the string
            parser.add_argument(flag, type=_parse_value, default=None, help=f.metadata["help"])


def _parse_bool(text: str) -> bool:
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def cmd_train(args: argparse.Namespace) -> int:
    import dataclasses
    from pathlib import Path

    from boltzoo.lightningrl.config import TrainerConfig
    from boltzoo.lightningrl.report import read_metrics
    from boltzoo.lightningrl.trainer import Trainer

    given = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(TrainerConfig)
        if f.name not in ("env", "model") and getattr(args, f.name) is not None
    }
    given["env"] = resolve_env_id(args.env)
    if args.model is not None:
        given["model"] = args.model
    saved = Path(given.get("output_dir", TrainerConfig.output_dir)) / "config.json"
    if args.resume and saved.exists():
        # The saved config, with the flags given on this command line on top.
        config = TrainerConfig.load(saved, **given)
    else:
        config = TrainerConfig(**given)
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
    evaluations = [m for m in read_metrics(config.output_dir) if "eval_success_rate" in m]
    if evaluations:
        first, last = evaluations[0], evaluations[-1]
        print(
            f"held-out success: {first['eval_success_rate']:.1%} at step {first['step']} -> "
            f"{last['eval_success_rate']:.1%} at step {last['step']} "
            f"({100 * (last['eval_success_rate'] - first['eval_success_rate']):+.1f} points)"
        )
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from boltzoo.lightningrl.report import plot_run

    try:
        paths = plot_run(args.run_dir, args.out)
    except FileNotFoundError as error:
        print(f"boltzoo: {error}", file=sys.stderr)
        return 2
    for path in paths:
        print(path)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from boltzoo.lightningrl.report import export_run

    try:
        print(export_run(args.run_dir, args.out_dir))
    except FileNotFoundError as error:
        print(f"boltzoo: {error}", file=sys.stderr)
        return 2
    return 0


def build_parser() -> argparse.ArgumentParser:
    """Return the ``boltzoo`` argument parser."""
    parser = argparse.ArgumentParser(prog="boltzoo", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("envs", help="list the registered envs")

    ev = sub.add_parser("eval", help="evaluate a policy on an env's tasks")
    ev.add_argument("env", help="env id, e.g. math-v0 or boltzoo/math-v0")
    ev.add_argument(
        "--policy",
        choices=[*sorted(SCRIPTED_POLICIES), *FRAMEWORK_POLICIES],
        default="oracle",
        help="a scripted policy, or a bundled framework agent over --model (via the gateway)",
    )
    ev.add_argument(
        "--model",
        default=None,
        help="a model for every agent: smollm2-135m or a local transformers folder (with a "
        "scripted --policy, the model replaces it)",
    )
    ev.add_argument("--max-new-tokens", type=int, default=256)
    ev.add_argument("--temperature", type=float, default=0.0, help="0: greedy decoding")
    ev.add_argument("--top-p", type=float, default=1.0)
    ev.add_argument(
        "--episodes",
        type=int,
        default=None,
        help="default: every task of the split; fewer are spread evenly over it",
    )
    ev.add_argument("--split", default="test")
    ev.add_argument("--seed", type=int, default=0)
    ev.add_argument(
        "-e",
        "--env-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="env keyword argument, e.g. -e level=medium -e max_turns=4 (repeatable)",
    )
    ev.add_argument("--json", action="store_true", help="print the summary as JSON")
    ev.add_argument("--quiet", action="store_true", help="no progress bar")

    train = sub.add_parser("train", help="train agents of an env with LightningRL")
    train.add_argument("env", help="env id, e.g. math-v0")
    train.add_argument("--model", default=None, help="smollm2-135m or a local model folder")
    train.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --output-dir (flags given here override its saved config)",
    )
    _config_flags(train)

    serve = sub.add_parser("serve", help="serve a model behind the OpenAI-compatible gateway")
    serve.add_argument("--model", default="smollm2-135m")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--api-key", default=None)
    serve.add_argument("--max-new-tokens", type=int, default=256)
    serve.add_argument("--temperature", type=float, default=1.0)
    serve.add_argument("--top-p", type=float, default=1.0)
    serve.add_argument("--seed", type=int, default=0)

    plot = sub.add_parser("plot", help="draw a training run's learning curves as PNG files")
    plot.add_argument("run_dir", help="a training run's --output-dir")
    plot.add_argument("--out", default=None, help="folder for the figures (default: RUN_DIR)")

    export = sub.add_parser(
        "export", help="save a run's latest checkpoint as a plain transformers model folder"
    )
    export.add_argument("run_dir", help="a training run's --output-dir")
    export.add_argument("out_dir", help="the model folder to write")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``boltzoo`` command line; return its exit status."""
    args = build_parser().parse_args(argv)
    configure_from_env()
    if args.command == "envs":
        print("\n".join(registered_envs()))
        return 0
    try:
        commands = {
            "serve": cmd_serve,
            "train": cmd_train,
            "eval": cmd_eval,
            "plot": cmd_plot,
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
