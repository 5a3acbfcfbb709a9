"""What every benchmark script shares: how it names the machine, records its results and runs
the training benchmarks (their common settings, the run, the plots)."""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import sys
from datetime import date
from pathlib import Path
from typing import Any

# What the SmolLM2 training benchmarks share (``boltzoo train`` arguments): a LoRA adapter (r 16),
# 8 tasks x 4 samples a step, the demo's temperature and learning rate, a bf16 sampling copy, a
# step budget that the time cap always ends first, no intermediate checkpoints, seed 0.
LORA_RUN_ARGS = [
    "--steps", "1000", "--tasks-per-step", "8", "--group-size", "4",
    "--temperature", "0.7", "--lr", "5e-4", "--lora-r", "16", "--lora-alpha", "32",
    "--sampler", "copy", "--sampler-precision", "bf16", "--precision", "bf16",
    "--save-every", "0", "--seed", "0",
]  # fmt: skip


def alternating_rounds(run: Any, ways: tuple[Any, Any], rounds: int) -> dict[Any, list[float]]:
    """Time ``run(way)`` for both ``ways``: one untimed call of each first (allocator warm-up),
    then ``rounds`` rounds whose order alternates (A B, B A, ...), so that neither way always
    runs on a warmer machine. Return the seconds of each way's timed calls."""
    import time

    seconds: dict[Any, list[float]] = {way: [] for way in ways}
    for round_ in range(-1, rounds):
        for way in ways if round_ % 2 == 0 else ways[::-1]:
            started = time.perf_counter()
            run(way)
            if round_ >= 0:
                seconds[way].append(time.perf_counter() - started)
    return seconds


def learner_trainer(model: Any, tokenizer: Any, env: str, env_kwargs: dict, **settings: Any) -> Any:
    """Return a Trainer whose learner the learner benchmarks time: RL's settings (LoRA r=16,
    bf16 autocast where the CPU has native bf16) over ``model`` in fp32, in train mode, with
    ``settings`` set over them; nothing samples (no sampling copy is built)."""
    from boltzoo.lightningrl.config import TrainerConfig
    from boltzoo.lightningrl.trainer import Trainer

    values = dict(
        env=env,
        env_kwargs=env_kwargs,
        output_dir=f"/tmp/{Path(sys.argv[0]).stem}",
        lora_r=16,
        lora_alpha=32,
        sampler="shared",
        precision="bf16",
        progress=False,
    )
    trainer = Trainer(
        TrainerConfig(**(values | settings)), model=model.float(), tokenizer=tokenizer
    )
    trainer.weights.modules["policy"].train()
    return trainer


def mixed_advantages(transitions: list[Any], seed: int = 0) -> list[Any]:
    """Give each call what GRPO gives a group whose reward varies: a non-zero advantage of
    either sign (seeded); return the calls."""
    import numpy as np

    rng = np.random.default_rng(seed)
    for t in transitions:
        t.advantage = float(rng.choice([-1.0, 1.0]) * rng.uniform(0.5, 1.5))
    return transitions


def machine_description() -> str:
    """Return the CPU model and its vector extensions (torch's: AVX2, AVX512...; two "AMD EPYC"
    machines here differed 31x in bf16), core count, memory, GPU (if any) and Python version,
    in one line."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    try:
        pages, page_size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        memory = f", {pages * page_size / 2**30:.0f} GiB"
    except (ValueError, OSError, AttributeError):
        pass
    gpu = ""
    try:
        import torch

        cpu = f"{cpu} ({torch.backends.cpu.get_cpu_capability()})"
        if torch.cuda.is_available():
            gpu = f", GPU {torch.cuda.get_device_name(0)}"
    except ImportError:
        pass
    return f"{cpu}, {os.cpu_count()} cores{memory}{gpu}, Python {platform.python_version()}"


def write_record(path: Path, rows: list[dict[str, Any]], **extra: Any) -> None:
    """Write the results with the command that produced them, the machine and the date."""
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "command": "python " + " ".join(shlex.quote(a) for a in sys.argv),
        "machine": machine_description(),
        "date": date.today().isoformat(),
        **extra,
        "results": rows,
    }
    path.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {path}")


def train(run_dir: Path, cli_args: list[str], resume: bool = False) -> list[dict[str, Any]]:
    """Run ``boltzoo train ... --output-dir run_dir`` (printing it); return its metrics rows.

    ``run_dir`` must not hold an earlier run (its metrics and checkpoints would mix with this
    one's), unless ``resume``: then the run there continues from its last checkpoint
    (``boltzoo train --resume``, the flags given here on top of its saved config).
    """
    from boltzoo.lightningrl.report import read_metrics

    if not resume and run_dir.exists() and any(run_dir.iterdir()):
        raise SystemExit(f"{run_dir} holds an earlier run: remove it, or pick another folder")

    command = [sys.executable, "-m", "boltzoo.cli", "train", *cli_args]
    command += ["--output-dir", str(run_dir), *(["--resume"] if resume else [])]
    print("$ boltzoo train", " ".join(shlex.quote(a) for a in command[4:]), flush=True)
    subprocess.run(command, check=True)
    return read_metrics(run_dir)


def plot_panels(
    curves: dict[str, dict[str, list[float]]], panels: dict[str, str], path: Path
) -> None:
    """Draw one panel per metric (``{metric: title}``), one line per variant, against minutes.

    ``curves[variant]`` holds ``"minutes"`` and each metric, as lists of the same length.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.2), squeeze=False)
    for ax, (metric, title) in zip(axes[0], panels.items(), strict=True):
        for variant, curve in curves.items():
            ax.plot(curve["minutes"], curve[metric], label=variant)
        ax.set_title(title)
        ax.set_xlabel("minutes of training")
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(f"wrote {path}")
