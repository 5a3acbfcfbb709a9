"""A warm start then RL on any env: held-out success untrained -> after SFT -> after RL.

    python scripts/bench_warm_start.py sql-v0 --demos 32 --minutes 10 \\
        --env-kwargs '{"agents": ["writer"], "schema_rows": 0}' --splits test test_unseen \\
        --out benchmarks/results/warm_start_sql.json

    python scripts/bench_warm_start.py math-v0 --framework autogen --demos 16 --minutes 15 \\
        --env-kwargs '{"level": "easy", "max_turns": 1}' --eval-every 5 \\
        --keep benchmarks/results/paper/math_autogen \\
        --out benchmarks/results/paper/math_autogen/held_out.json

    python scripts/bench_warm_start.py sql-v0 --framework langgraph-sql-graph --demos 64 \\
        --env-kwargs '{"agents": ["writer"], "schema_rows": 0}' --sft-agents '["writer"]' \\
        --review-demos 64 --reviewers checker,rewriter --train-agents 'writer|checker|rewriter' \\
        --max-new-tokens 96 --splits test test_unseen --out runs/sql-graph.json

The recipe, with the command line only: ``boltzoo rollout --policy oracle`` records ``--demos``
demonstrations on the train split (with ``--framework``, ``--policy FRAMEWORK --oracle``: the
env's oracle answers the framework agent's model calls, so the demonstrations are the tokens the
framework sends, and the warm start and RL run through the same agent); ``boltzoo sft``
fine-tunes a LoRA adapter (r=16) on them; ``boltzoo train --init-from`` continues with
LightningRL (both with bf16 autocast in the learner where the CPU has native bf16, else fp32)
for ``--minutes`` of training. With ``--review-demos N --reviewers AGENTS`` (a framework agent),
between the two: the warm start (exported) plays N train episodes with the oracle answering only
AGENTS' calls, so a checker's demonstrations are verdicts on the model's own queries, right and
wrong, and a second SFT pass from the first teaches AGENTS those (``--review-temperature``: the
temperature those episodes are played at; ``--review-epochs``: the pass's epochs, one by default
whatever ``--sft-epochs`` gives the first); RL starts from it. ``--sft-init-from RUN`` starts
the first pass from a finished run's weights (one more epoch of a pass already made).
``--policy-map`` gives RL one adapter per policy name, each started from the pass that taught
its agents (the reviewers' from the second, the writer's from the first, which the second pass
then cannot move); ``--warm-start-from RUN`` takes the demonstrations and both passes from a
finished run of this script, so RL arms (a policy map, the writer alone) start from one warm
start. Then each ``--splits`` split is evaluated three times with the same code and tasks
(greedy, ``--eval-tasks`` tasks spread over the split, through the bf16 sampling copy, fp32
where the CPU has no native bf16): the untrained model, the warm start, and the RL run's last
checkpoint (``--stages``: only some). Writes the figures to ``--out`` and the RL run's curves
(``boltzoo plot``) into the run folder; ``--keep DIR`` copies the runs' records
(``metrics.jsonl``, ``config.json``, the plots; not the weights) to ``DIR/sft``,
``DIR/sft_review`` and ``DIR/rl``. With ``--eval-every K`` the RL run also evaluates held-out
every K steps (its first evaluation is RL's starting point, its last the result). ``--resume``
continues an earlier run of the same command in ``--run-dir`` (killed, or stopped by a smaller
``--minutes``): the demonstrations already recorded are kept, the SFT passes and the RL run
continue from their last checkpoints (RL saves one every ``--save-every`` steps), RL to the
``--minutes`` given now. ``--demo-env-kwargs`` sets env arguments for the demonstrations and the
warm start only (a stage taught three-hop questions alone, RL then on all of them), and
``--replay-extra`` has RL replay more demonstration files beside the run's own (an earlier
stage's, so RL keeps what it taught); ``--sft-extra`` has the first SFT pass learn more
demonstration files beside the run's own (a warm start on both stages' tasks). """

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchlib import train, write_record
from boltzoo.cli import FRAMEWORK_POLICIES
from boltzoo.lightningrl.config import TrainerConfig, choices


def boltzoo(*args: str) -> None:
    """Run one ``boltzoo`` command (printing it), failing loudly."""
    print("$ boltzoo", " ".join(shlex.quote(a) for a in args), flush=True)
    subprocess.run([sys.executable, "-m", "boltzoo.cli", *args], check=True)


STAGES = ("untrained", "warm_start", "rl")


def held_out(
    rl_dir: Path,
    warm: Path | dict[str, str],
    split: str,
    by: str | None,
    stages: tuple[str, ...] = STAGES,
) -> dict[str, Any]:
    """Evaluate ``stages`` (of the untrained model, the warm start ``warm``: RL's init_from,
    and the RL run) on ``split``; with ``by`` (a task field, e.g. ``template``), also count
    each stage's right answers by its value."""
    from boltzoo.lightningrl.config import TrainerConfig
    from boltzoo.lightningrl.curriculum import task_pools
    from boltzoo.lightningrl.trainer import Trainer
    from boltzoo.registration import inspected

    config = TrainerConfig.load(
        rl_dir / "config.json", eval_env_kwargs={"split": split}, init_from=None
    )
    figures: dict[str, Any] = {}
    results = {}
    with Trainer(config) as trainer:
        for stage in stages:
            if stage != "untrained":  # (before RL's weights too: its frozen agents' warm start)
                trainer.load_weights_from(warm)
            if stage == "rl" and not trainer.resume():
                raise RuntimeError(f"{rl_dir} holds no checkpoint")
            results[stage] = result = trainer.evaluate()
            figures[f"{stage}_success"] = result["eval_success_rate"]
            figures[f"{stage}_score"] = result["eval_score"]
            print(f"{split} {stage}: {result}", flush=True)
    if by:
        with inspected(config.env, **(config.env_kwargs | {"split": split})) as env:
            pools = task_pools(env.tasks, by)
        table: dict[str, dict[str, int]] = {}
        for index in results[stages[0]]["eval_task_ids"]:
            row = table.setdefault(pools[index], {"tasks": 0} | dict.fromkeys(stages, 0))
            row["tasks"] += 1
            for stage in stages:
                row[stage] += index in results[stage]["eval_right"]
        figures[f"right_by_{by}"] = dict(sorted(table.items(), key=lambda kv: -kv[1]["tasks"]))
    return figures


def tally_field(env_id: str, env_kwargs: dict[str, Any], by: str | None) -> str | None:
    """Return the task field to count right answers by: ``by``, checked now (not after the
    runs), or without one ``"template"`` where the env's tasks have it, else None."""
    from boltzoo.lightningrl.curriculum import task_pools
    from boltzoo.registration import inspected

    with inspected(env_id, **env_kwargs) as env:
        tasks = env.tasks
    if by is None:
        return "template" if tasks and hasattr(tasks[0], "template") else None
    try:
        task_pools(tasks, by)
    except ValueError as error:
        raise SystemExit(f"--by: {error}") from None
    return by


def policy_warm_starts(
    policy_map: dict[str, str], reviewers: list[str], first: Path, second: Path
) -> dict[str, str]:
    """Return RL's ``init_from`` for ``policy_map`` (agent -> policy name): each policy from
    the warm start pass that taught its agents, ``second`` for ``reviewers``, else ``first``.

    Raises:
        SystemExit: a policy whose agents were taught by both passes (one adapter cannot start
            from two runs).
    """
    warm: dict[str, str] = {}
    for name, policy in policy_map.items():
        taught = str(second if name in reviewers else first)
        if warm.setdefault(policy, taught) != taught:
            raise SystemExit(
                f"--policy-map: policy {policy!r} has agents from both warm start passes "
                "(reviewers and others): give them policies of their own"
            )
    return warm


def episode_count(path: Path) -> int:
    """Return how many episodes an Episode JSONL file holds (0 if there is none)."""
    if not path.exists():
        return 0
    with path.open() as lines:
        return sum(1 for line in lines if line.strip())


def keep_records(runs: dict[str, Path], keep: Path) -> None:
    """Copy the runs' records (metrics, config, plots; no weights) into ``keep``: each of
    ``runs`` (stage name -> run folder) that exists into ``keep / stage``."""
    for stage, folder in runs.items():
        if not folder.is_dir():
            continue
        (keep / stage).mkdir(parents=True, exist_ok=True)
        for path in sorted(folder.glob("*")):
            if path.name in ("metrics.jsonl", "config.json") or path.suffix == ".png":
                shutil.copy(path, keep / stage / path.name)
    print(f"kept the runs' records in {keep}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("env")
    parser.add_argument("--env-kwargs", default="{}", help="JSON: the env's arguments")
    parser.add_argument(
        "--demo-env-kwargs",
        default="{}",
        help="JSON: set over --env-kwargs for the demonstrations and the warm start only (e.g. "
        '{"hops": 3}: a stage that teaches the hard questions alone, RL then on all of them)',
    )
    parser.add_argument("--train-agents", default=None, help="JSON list (default: all)")
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument(
        "--framework",
        default=None,
        choices=FRAMEWORK_POLICIES,
        help="the agent that plays: demonstrations, warm start and RL through it",
    )
    parser.add_argument("--demos", type=int, default=32, help="oracle demonstrations")
    parser.add_argument(
        "--sft-agents", default=None, help="who learns the demonstrations (default: RL's)"
    )
    parser.add_argument(
        "--review-demos",
        type=int,
        default=0,
        help="with --framework and --reviewers: then this many episodes where the warm-started "
        "model plays and the oracle answers the reviewers' calls (e.g. a checker's verdicts on "
        "the model's own queries), which the reviewers learn in a second warm start pass",
    )
    parser.add_argument("--reviewers", default=None, help="agents or graph nodes, comma-separated")
    parser.add_argument(
        "--frozen-policy",
        default=None,
        help="RL: the agents that do not learn act with this "
        "policy's warm start (e.g. a checker beside a writer that learns)",
    )
    parser.add_argument(
        "--review-temperature",
        type=float,
        default=None,
        help="the review episodes' sampling temperature (default: --temperature)",
    )
    parser.add_argument("--sft-epochs", type=int, default=1, help="the first pass's epochs")
    parser.add_argument(
        "--sft-extra",
        nargs="+",
        type=Path,
        default=[],
        help="more Episode JSONL files the first pass learns beside this run's demonstrations "
        "(e.g. an earlier stage's, so the warm start holds both kinds of task)",
    )
    parser.add_argument(
        "--review-epochs", type=int, default=1, help="the second pass's epochs (--review-demos)"
    )
    parser.add_argument(
        "--sft-init-from",
        type=Path,
        default=None,
        help="the first SFT pass starts from this run's weights (e.g. a pass already made on "
        "the same demonstrations: one more epoch)",
    )
    parser.add_argument(
        "--warm-start-from",
        type=Path,
        default=None,
        help="take the demonstrations and the warm start (with --review-demos, the review "
        "episodes and the second pass too) from this finished run folder of this script: only "
        "RL and the evaluations run (RL arms from one warm start)",
    )
    parser.add_argument(
        "--policy-map",
        default=None,
        help="RL: JSON agent (or node) -> policy name, for every agent that learns; each "
        "policy starts from the warm start pass that taught its agents (the reviewers' from "
        "the second, the others' from the first): one adapter per node",
    )
    parser.add_argument("--sft-lr", type=float, default=5e-4)
    parser.add_argument("--minutes", type=float, default=10.0, help="RL training minutes")
    parser.add_argument("--lr", type=float, default=1e-4, help="RL learning rate")
    parser.add_argument(
        "--aggregation",
        choices=choices(TrainerConfig)["aggregation"],
        default=TrainerConfig.aggregation,
        help="RL: the loss's mean over tokens, or over calls (each its tokens' mean), or over "
        "episodes (boltzoo train's; e.g. sequence where long boilerplate calls outnumber the "
        "short ones that decide, as a tool call's JSON beside a short answer)",
    )
    parser.add_argument(
        "--task-sampling",
        choices=choices(TrainerConfig)["task_sampling"],
        default=TrainerConfig.task_sampling,
        help="RL: which tasks a step draws (boltzoo train's; learnability with --task-pool-field "
        "hops keeps drawing each kind of question while its reward varies)",
    )
    parser.add_argument(
        "--task-pool-field", default=None, help="RL, with --task-sampling learnability"
    )
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--tasks-per-step", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--eval-every", type=int, default=0, help="RL's held-out curve")
    parser.add_argument(
        "--replay-calls",
        type=int,
        default=0,
        help="RL replays this many demonstrated calls a step (coefficient 1; 0: none)",
    )
    parser.add_argument(
        "--replay-extra",
        nargs="+",
        type=Path,
        default=[],
        help="with --replay-calls: more Episode JSONL files replayed beside this run's own "
        "demonstrations (e.g. an earlier stage's, so RL keeps what they taught)",
    )
    parser.add_argument(
        "--splits",
        nargs="*",
        default=["test"],
        help="the splits evaluated after RL (none: RL's own --eval-every curve is the record)",
    )
    parser.add_argument("--eval-tasks", type=int, default=100)
    parser.add_argument(
        "--stages",
        nargs="+",
        choices=STAGES,
        default=list(STAGES),
        help="which models the final held-out evaluations cover (e.g. leave out an untrained "
        "model measured before on the same tasks)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--by",
        default=None,
        help="count right answers by this task field (default: template, where the tasks have one)",
    )
    parser.add_argument("--run-dir", type=Path, default=None)
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the earlier run in --run-dir (its RL to --minutes)",
    )
    parser.add_argument(
        "--save-every",
        type=int,
        default=5,
        help="RL checkpoints every K steps (and at the end): where a killed run resumes",
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--keep", type=Path, default=None, help="copy the runs' records here")
    args = parser.parse_args()
    run_dir = args.run_dir or Path("runs") / f"bench-{args.out.stem}"
    if args.resume and not run_dir.is_dir():
        raise SystemExit(f"--resume: {run_dir} holds no run to continue")
    if not args.resume and run_dir.exists() and any(run_dir.iterdir()):
        raise SystemExit(
            f"{run_dir} holds an earlier run: remove it, pick another folder, or --resume it"
        )
    if args.review_demos and not (args.framework and args.reviewers):
        raise SystemExit("--review-demos needs --framework and --reviewers")
    env_kwargs = json.loads(args.env_kwargs)
    demo_env_kwargs = env_kwargs | json.loads(args.demo_env_kwargs)
    by = tally_field(args.env, env_kwargs, args.by)
    if demo_env_kwargs != env_kwargs:  # an env those arguments cannot make fails now, not later
        from boltzoo.registration import inspected

        with inspected(args.env, **demo_env_kwargs):
            pass
    env_args = [arg for k, v in demo_env_kwargs.items() for arg in ("-e", f"{k}={json.dumps(v)}")]
    agents = ["--train-agents", args.train_agents] if args.train_agents else []
    lora = ["--lora-r", "16", "--lora-alpha", "32", "--seed", str(args.seed)]
    framework = ["--framework", args.framework] if args.framework else []
    oracle = [args.framework, "--oracle"] if args.framework else ["oracle"]
    source = args.warm_start_from or run_dir  # where the demonstrations and warm start are
    demos, sft_dir, rl_dir = source / "demos.jsonl", source / "sft", run_dir / "rl"
    model_dir, reviews = source / "sft_model", source / "review_demos.jsonl"
    review_dir = source / "sft_review"
    if args.warm_start_from:
        wanted = [demos, sft_dir, *([review_dir] if args.review_demos else [])]
        if missing := [str(path) for path in wanted if not path.exists()]:
            raise SystemExit(f"--warm-start-from {source}: no {', '.join(missing)}")
        if args.sft_init_from:
            raise SystemExit("--warm-start-from takes a warm start as made: no --sft-init-from")
    reviewers = [name.strip() for name in (args.reviewers or "").split(",") if name.strip()]
    if args.replay_extra and not args.replay_calls:
        raise SystemExit("--replay-extra needs --replay-calls")
    for option, paths in (("--replay-extra", args.replay_extra), ("--sft-extra", args.sft_extra)):
        if missing := [str(path) for path in paths if not path.is_file()]:
            raise SystemExit(f"{option}: no file {', '.join(missing)}")
    if args.sft_extra and args.warm_start_from:
        raise SystemExit("--warm-start-from takes a warm start as made: no --sft-extra")
    replay = []
    if args.replay_calls:
        replayed = json.dumps([str(path) for path in (demos, *args.replay_extra)])
        replay = ["--replay-demos", replayed, "--replay-calls", str(args.replay_calls)]
        replay += ["--replay-coef", "1.0"]

    resume = ["--resume"] if args.resume else []
    if args.resume and not args.warm_start_from:  # (a warm start learned from other counts)
        for path, asked in ((demos, args.demos), (reviews, args.review_demos)):
            if path.exists() and (held := episode_count(path)) != asked:
                raise SystemExit(
                    f"--resume: {path} holds {held} episodes, this command asks for {asked}: "
                    "resume with the run's own count, or start a new --run-dir"
                )
    if not args.warm_start_from and not (args.resume and demos.exists()):
        boltzoo("rollout", args.env, "--policy", *oracle, "--split", "train", "--episodes",
                str(args.demos), "--seed", str(args.seed), *env_args, "--out", str(demos),
                "--quiet")  # fmt: skip
    sft_agents = ["--train-agents", args.sft_agents] if args.sft_agents else agents
    sft = ["--env-kwargs", json.dumps(demo_env_kwargs), "--lr", str(args.sft_lr),
           "--batch-size", "4", "--eval-tasks", "0", "--precision", "bf16", "--max-new-tokens",
           str(args.max_new_tokens), *framework, *lora]  # fmt: skip
    init = ["--init-from", str(args.sft_init_from)] if args.sft_init_from else []
    if not args.warm_start_from:
        taught = json.dumps([str(path) for path in (demos, *args.sft_extra)])
        boltzoo("sft", args.env, "--model", args.model, *init, "--demos", taught,
                "--output-dir", str(sft_dir), "--epochs", str(args.sft_epochs), *sft,
                *sft_agents, *resume)  # fmt: skip
    warm: Path | dict[str, str] = sft_dir
    if args.review_demos and not args.warm_start_from:
        # the warm start plays, the oracle reviews; the reviewers learn its answers
        review_temperature = args.review_temperature
        if review_temperature is None:
            review_temperature = args.temperature
        if not (args.resume and reviews.exists()):
            boltzoo("export", str(sft_dir), str(model_dir))
            boltzoo("rollout", args.env, "--policy", args.framework, "--model", str(model_dir),
                    "--oracle", args.reviewers, "--split", "train", "--episodes",
                    str(args.review_demos), "--seed", str(args.seed), "--temperature",
                    str(review_temperature), "--max-new-tokens", str(args.max_new_tokens),
                    *env_args, "--out", str(reviews), "--quiet")  # fmt: skip
        boltzoo("sft", args.env, "--model", args.model, "--init-from", str(sft_dir), "--demos",
                str(reviews), "--output-dir", str(review_dir), "--epochs",
                str(args.review_epochs), *sft, "--train-agents", json.dumps(reviewers),
                *resume)  # fmt: skip
    if args.review_demos:
        warm = review_dir
    policy_map = json.loads(args.policy_map) if args.policy_map else {}
    if policy_map:
        warm = policy_warm_starts(policy_map, reviewers if args.review_demos else [], sft_dir,
                                  review_dir)  # fmt: skip
    init_from = json.dumps(warm) if isinstance(warm, dict) else str(warm)
    rows = train(rl_dir, [
        args.env, "--model", args.model, "--init-from", init_from,
        "--env-kwargs", args.env_kwargs, *framework, *agents,
        "--max-train-minutes", str(args.minutes), "--steps", "1000",
        "--tasks-per-step", str(args.tasks_per_step), "--group-size", str(args.group_size),
        "--max-new-tokens", str(args.max_new_tokens), "--temperature", str(args.temperature),
        "--lr", str(args.lr), "--aggregation", args.aggregation,
        "--sampler", "copy", "--sampler-precision", "bf16",
        "--precision", "bf16", "--eval-every", str(args.eval_every),
        "--eval-tasks", str(args.eval_tasks),
        "--save-every", str(args.save_every), *lora, *replay,
        "--task-sampling", args.task_sampling,
        *(["--task-pool-field", args.task_pool_field] if args.task_pool_field else []),
        *(["--frozen-policy", args.frozen_policy] if args.frozen_policy else []),
        *(["--policy-map", args.policy_map] if policy_map else []),
    ], resume=args.resume)  # fmt: skip
    boltzoo("plot", str(rl_dir))
    stages = tuple(stage for stage in STAGES if stage in args.stages)
    figures = {split: held_out(rl_dir, warm, split, by, stages) for split in args.splits}
    steps = [r for r in rows if "reward" in r]
    taken = args.warm_start_from is not None  # (the counts are then what that run recorded)
    write_record(
        args.out,
        [{"split": split, **values} for split, values in figures.items()],
        env=args.env,
        env_kwargs=env_kwargs,
        demo_env_kwargs=demo_env_kwargs if demo_env_kwargs != env_kwargs else None,
        replay_extra=[str(path) for path in args.replay_extra] or None,
        sft_extra=[str(path) for path in args.sft_extra] or None,
        framework=args.framework,
        demos=episode_count(demos) if taken else args.demos,
        review_demos=episode_count(reviews) if taken and args.review_demos else args.review_demos,
        warm_start_from=str(args.warm_start_from) if args.warm_start_from else None,
        policy_map=policy_map or None,
        rl_steps=len(steps),
        rl_minutes=round(steps[-1]["train_seconds"] / 60, 2) if steps else 0.0,
        train_success=[round(r["success_rate"], 3) for r in steps],
        eval_tasks=args.eval_tasks,
    )
    if args.keep:  # the runs this command made (a warm start taken as made keeps its own)
        runs = {"rl": rl_dir}
        if not args.warm_start_from:
            runs |= {"sft": sft_dir, "sft_review": review_dir}
        for stage in ("sft", "sft_review"):
            if stage in runs and runs[stage].is_dir():
                boltzoo("plot", str(runs[stage]))
        keep_records(runs, args.keep)
    names = {"untrained": "untrained", "warm_start": "warm start", "rl": "RL"}
    for split, values in figures.items():
        line = " -> ".join(f"{names[s]} {values[f'{s}_success']:.1%}" for s in stages)
        print(f"{args.env} {split}: {line}")


if __name__ == "__main__":
    main()
