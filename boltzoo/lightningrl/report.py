"""After a run: learning-curve figures (``plot_run``, and ``compare_runs`` for several runs on
one figure), two held-out evaluations compared task by task (``paired_outcomes``; with the
tasks grouped by a field, ``compare_evaluations``). (A run's export as plain transformers
folders is ``policies.export_run``.)

A run directory holds ``metrics.jsonl`` (one JSON object per step, written by the trainer) and
``checkpoints/`` (see ``checkpoint.py``). Figures are drawn with matplotlib's Agg backend, so no
display is needed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from boltzoo.errors import DatasetError

METRICS = "metrics.jsonl"

LOSS_METRICS = ("pg_loss", "kl", "entropy", "clip_fraction", "grad_norm")


def read_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    """Return the per-step metrics of a run, one dict per line of ``metrics.jsonl``."""
    path = Path(run_dir) / METRICS
    if not path.exists():
        raise FileNotFoundError(f"no metrics file {path} (is {run_dir} a training run folder?)")
    rows: list[dict[str, Any]] = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise DatasetError(f"{path} line {number} is not JSON: {error}") from None
        if not isinstance(row, dict) or "step" not in row:
            raise DatasetError(f"{path} line {number} is not an object with a 'step'")
        rows.append(row)
    return rows


def _series(rows: list[dict[str, Any]], key: str) -> tuple[list[float], list[float]]:
    """Return ``(steps, values)`` of the rows that hold a numeric ``key``."""
    points = [
        (r["step"], r[key])
        for r in rows
        if isinstance(r.get(key), int | float) and not isinstance(r.get(key), bool)
    ]
    return [s for s, _ in points], [v for _, v in points]


def _figure(
    rows: list[dict[str, Any]],
    lines: Sequence[tuple[str, str, dict[str, Any]]],
    path: Path,
    title: str,
    ylabel: str,
    twin: Sequence[tuple[str, str, dict[str, Any]]] = (),
    twin_label: str = "",
) -> Path | None:
    """Draw ``(metric, label, style)`` lines against step; None (nothing written) if all absent."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    present = [(k, label, style, *_series(rows, k)) for k, label, style in lines]
    present = [p for p in present if p[3]]
    twin_present = [(k, label, style, *_series(rows, k)) for k, label, style in twin]
    twin_present = [p for p in twin_present if p[3]]
    if not present and not twin_present:
        return None
    fig, ax = plt.subplots(figsize=(8, 4.5))
    try:
        handles = []
        for _, label, style, steps, values in present:
            handles += ax.plot(steps, values, label=label, **style)
        ax.set_xlabel("step")
        ax.set_ylabel(ylabel)
        if twin_present:
            other = ax.twinx()
            for _, label, style, steps, values in twin_present:
                handles += other.plot(steps, values, label=label, **style)
            other.set_ylabel(twin_label)
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        ax.legend(handles=handles, labels=[h.get_label() for h in handles], loc="best")
        fig.tight_layout()
        fig.savefig(path, dpi=100)
    finally:
        plt.close(fig)
    return path


def plot_run(run_dir: str | Path, out_dir: str | Path | None = None) -> list[Path]:
    """Write PNG learning curves of a run to ``out_dir`` (default: the run folder); return them.

    ``learning_curve.png``: training reward and score, held-out success and score where
    evaluated, and the share of episodes that used a tool (where the env counts tool calls);
    ``loss.png``: pg_loss, kl, entropy, clip_fraction, grad_norm; ``throughput.png``: rollout
    and update seconds per step, and training tokens per second. A figure whose metrics
    are all absent is not written.
    """
    run_dir = Path(run_dir)
    rows = read_metrics(run_dir)
    out = Path(out_dir) if out_dir is not None else run_dir
    out.mkdir(parents=True, exist_ok=True)
    name = str(run_dir)
    point = {"marker": "o", "linestyle": "--"}
    figures = [
        _figure(
            rows,
            [
                ("reward", "train reward", {}),
                ("score", "train score", {}),
                ("eval_success_rate", "held-out success", point),
                ("eval_score", "held-out score", point),
                ("tool_use_rate", "episodes that used a tool", {"linestyle": ":"}),
            ],
            out / "learning_curve.png",
            f"Learning curve: {name}",
            "reward / score / success",
        ),
        _figure(
            rows,
            [(k, k, {}) for k in LOSS_METRICS],
            out / "loss.png",
            f"Loss and update statistics: {name}",
            "value",
        ),
        _figure(
            rows,
            [
                ("rollout_seconds", "rollout seconds", {}),
                ("update_seconds", "update seconds", {}),
            ],
            out / "throughput.png",
            f"Throughput: {name}",
            "seconds per step",
            twin=[("train_tokens_per_second", "train tokens/s", {"color": "tab:green"})],
            twin_label="train tokens per second",
        ),
    ]
    return [p for p in figures if p is not None]


def trailing_mean(values: Sequence[float], window: int) -> list[float]:
    """Return the mean of each value and the ``window - 1`` before it (fewer at the start)."""
    if window < 1:
        raise ValueError(f"window must be at least 1, got {window}")
    means, total = [], 0.0
    for i, value in enumerate(values):
        total += value
        if i >= window:
            total -= values[i - window]
        means.append(total / min(i + 1, window))
    return means


def run_labels(run_dirs: Sequence[str | Path], labels: Sequence[str] | None = None) -> list[str]:
    """Name each run: by ``labels`` (one per run) or by its folder's name."""
    if labels is None:
        return [Path(r).name for r in run_dirs]
    if len(labels) != len(run_dirs):
        raise ValueError(f"{len(labels)} labels for {len(run_dirs)} runs")
    return list(labels)


def compare_runs(
    run_dirs: Sequence[str | Path],
    out_path: str | Path,
    labels: Sequence[str] | None = None,
    window: int = 10,
) -> Path:
    """Draw several runs on one figure (``out_path``, a PNG) and return its path.

    Left: held-out success at each evaluated step. Right: training success (``success_rate``,
    the share of a step's sampled episodes that succeeded) as a trailing mean over ``window``
    steps, since a single step's 20-40 episodes are too noisy to compare runs by. Runs are
    named by ``labels`` (default: their folder names).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = run_labels(run_dirs, labels)
    metrics = [read_metrics(r) for r in run_dirs]
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig, (held_out, training) = plt.subplots(1, 2, figsize=(12, 4.5))
    try:
        for rows, name in zip(metrics, names, strict=True):
            steps, values = _series(rows, "eval_success_rate")
            held_out.plot(steps, values, marker="o", label=name)
            steps, values = _series(rows, "success_rate")
            training.plot(steps, trailing_mean(values, window), label=name)
        held_out.set_title("held-out success")
        training.set_title(f"training success, mean of the last {window} steps")
        for ax in (held_out, training):
            ax.set_xlabel("step")
            ax.set_ylabel("success rate")
            ax.grid(True, alpha=0.3)
            ax.legend(loc="best")
        fig.tight_layout()
        fig.savefig(out, dpi=100)
    finally:
        plt.close(fig)
    return out


@dataclass(frozen=True)
class PairedOutcomes:
    """Two held-out evaluations compared on the tasks both played: ``kept`` tasks solved by
    both, ``gained`` solved only by the second, ``lost`` only by the first, out of ``tasks``.

    ``p_value`` is the exact two-sided McNemar test (a sign test on the ``gained + lost``
    tasks that changed): the chance of a split at least this uneven if the two were equally
    good. A difference of a few points on 100 tasks usually has a large one.
    """

    tasks: int
    kept: int
    gained: int
    lost: int

    @property
    def p_value(self) -> float:
        changed = self.gained + self.lost
        tail = sum(math.comb(changed, k) for k in range(min(self.gained, self.lost) + 1))
        return min(1.0, 2 * tail / 2**changed)

    def __str__(self) -> str:
        return (
            f"{self.tasks} tasks: {self.kept} right in both, +{self.gained} newly right, "
            f"-{self.lost} newly wrong (net {self.gained - self.lost:+d}, "
            f"McNemar p={self.p_value:.2g})"
        )


def paired_outcomes(before: dict[str, Any], after: dict[str, Any]) -> PairedOutcomes:
    """Compare two evaluation rows of ``metrics.jsonl`` (each with ``eval_task_ids`` and
    ``eval_right``, as ``Trainer.evaluate`` logs them) task by task, on the tasks both played.
    """
    for row in (before, after):
        if "eval_task_ids" not in row or "eval_right" not in row:
            raise ValueError(
                f"the evaluation at step {row.get('step')} has no task-by-task outcomes "
                "(eval_task_ids, eval_right): it was logged by an older boltzoo"
            )
    common = set(before["eval_task_ids"]) & set(after["eval_task_ids"])
    right_before = set(before["eval_right"]) & common
    right_after = set(after["eval_right"]) & common
    return PairedOutcomes(
        tasks=len(common),
        kept=len(right_before & right_after),
        gained=len(right_after - right_before),
        lost=len(right_before - right_after),
    )


def evaluation_at(run_dir: str | Path, step: int | None = None, last: bool = True) -> dict:
    """Return the evaluation row of ``metrics.jsonl`` logged at ``step`` (``None``: the run's
    last evaluation, or its first when not ``last``).

    Raises:
        ValueError: When the run has no such evaluation.
    """
    evaluations = [m for m in read_metrics(run_dir) if "eval_success_rate" in m]
    if step is not None:
        evaluations = [m for m in evaluations if m["step"] == step]
    if not evaluations:
        at = f" at step {step}" if step is not None else ""
        raise ValueError(f"{run_dir} has no held-out evaluation{at}")
    return evaluations[-1] if last else evaluations[0]


def compare_evaluations(
    before_run: str | Path,
    after_run: str | Path | None = None,
    before_step: int | None = None,
    after_step: int | None = None,
    by: str | None = None,
) -> dict[str, Any]:
    """Compare two held-out evaluations task by task, overall and per value of a task field.

    Args:
        before_run: the run whose evaluation comes first (at ``before_step``; default: its
            first evaluation).
        after_run: the run whose evaluation comes second (at ``after_step``; default: its
            last); ``None``: ``before_run`` again, so its first and last evaluations compare.
        by: a field of the env's tasks (``template``, ``level``, ``db_id``...) to group the
            tasks by; the tasks are those of ``after_run``'s evaluation env (its config's
            ``env``, ``env_kwargs`` and ``eval_env_kwargs``).

    Returns:
        ``{"before": {run, step, success_rate}, "after": {...}, "paired": PairedOutcomes}``,
        and with ``by``: ``"groups"``, one ``{value, tasks, right_before, right_after}`` per
        value of the field, the most gained first.

    Raises:
        ValueError: When an evaluation is missing or has no outcomes per task
            (``paired_outcomes``), or the two runs evaluated different tasks.
    """
    after_run = before_run if after_run is None else after_run
    before = evaluation_at(before_run, before_step, last=False)
    after = evaluation_at(after_run, after_step, last=True)
    configs = [json.loads((Path(r) / "config.json").read_text()) for r in (before_run, after_run)]
    envs = [
        (c["env"], {**c.get("env_kwargs", {}), **c.get("eval_env_kwargs", {})}) for c in configs
    ]
    if envs[0][0] != envs[1][0] or (
        envs[0] != envs[1] and _task_ids(*envs[0]) != _task_ids(*envs[1])
    ):
        # (other arguments, a tool reward or a turn limit, may differ: the tasks may not)
        raise ValueError(f"the runs evaluated different tasks: {envs[0]} and {envs[1]}")
    result: dict[str, Any] = {
        "before": {
            "run": str(before_run),
            "step": before["step"],
            "success_rate": before["eval_success_rate"],
        },
        "after": {
            "run": str(after_run),
            "step": after["step"],
            "success_rate": after["eval_success_rate"],
        },
        "paired": paired_outcomes(before, after),
    }
    if by is not None:
        from boltzoo.lightningrl.curriculum import task_pools
        from boltzoo.registration import inspected

        env_id, kwargs = envs[1]
        with inspected(env_id, **kwargs) as env:
            pools = task_pools(env.tasks, by)
        common = sorted(set(before["eval_task_ids"]) & set(after["eval_task_ids"]))
        right = [set(before["eval_right"]), set(after["eval_right"])]
        groups: dict[str, list[int]] = {}
        for index in common:
            value = groups.setdefault(pools[index], [0, 0, 0])
            value[0] += 1
            value[1] += index in right[0]
            value[2] += index in right[1]
        result["groups"] = [
            {"value": v, "tasks": n, "right_before": b, "right_after": a}
            for v, (n, b, a) in sorted(groups.items(), key=lambda kv: (kv[1][1] - kv[1][2], kv[0]))
        ]
    return result


def _task_ids(env_id: str, kwargs: dict[str, Any]) -> list[str]:
    from boltzoo.registration import inspected

    with inspected(env_id, **kwargs) as env:
        return [str(getattr(t, "task_id", t)) for t in env.tasks]
