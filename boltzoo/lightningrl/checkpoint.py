"""Checkpoints that a killed run can never corrupt.

A checkpoint is a folder ``checkpoints/step-000042`` holding the trained weights
(``model.safetensors``), the optimiser and scheduler states, the RNG states and the config. It is
written in full to a hidden temporary folder, flushed to disk, and only then renamed into place;
the file ``checkpoints/latest`` (replaced atomically too) names the newest. A run killed at any
moment leaves either the previous checkpoint or the new one, never half of one: leftover
temporary folders are ignored and removed by the next save. The folders' entries are fsynced
too, so a rename survives a power cut.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

LATEST = "latest"


def _fsync_tree(folder: Path) -> None:
    for path in folder.iterdir():
        with path.open("rb") as f:
            os.fsync(f.fileno())
    _fsync_dir(folder)


def _fsync_dir(folder: Path) -> None:
    """Flush a folder's entries (the names of what was created or renamed in it) to disk."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _step_of(folder: Path) -> int:
    return int(folder.name.rsplit("-", 1)[1])


def save_checkpoint(
    root: str | Path,
    step: int,
    weights: dict[str, torch.Tensor],
    state: dict[str, Any],
    config: dict[str, Any],
    keep: int = 3,
) -> Path:
    """Write checkpoint ``step`` under ``root`` atomically; return its folder.

    ``weights`` go to safetensors; ``state`` (optimiser, scheduler, RNG states, counters) to
    ``state.pt``; ``config`` to ``config.json``. Only the ``keep`` newest checkpoints stay.
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step-{step:06d}"
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-step-{step:06d}-", dir=root))
    # clone(): tied weights share storage, which safetensors refuses to write twice
    tensors = {k: v.detach().cpu().clone() for k, v in weights.items()}
    save_file(tensors, tmp / "model.safetensors")
    torch.save(state, tmp / "state.pt")
    (tmp / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    _fsync_tree(tmp)
    if final.exists():  # the same step saved again: the old copy stays until the new is in
        os.replace(final, root / f".replaced-step-{step:06d}")
    os.replace(tmp, final)
    pointer = root / f".{LATEST}.tmp"
    pointer.write_text(final.name + "\n")
    with pointer.open("rb") as f:
        os.fsync(f.fileno())
    os.replace(pointer, root / LATEST)
    _fsync_dir(root)
    for stale in [*root.glob(".tmp-step-*"), *root.glob(".replaced-step-*")]:
        shutil.rmtree(stale, ignore_errors=True)  # left by runs killed mid-write, or replaced
    finished = sorted(p for p in root.glob("step-*") if p.is_dir())
    for old in finished[:-keep] if keep > 0 else []:
        if old != final:
            shutil.rmtree(old, ignore_errors=True)
    return final


def latest_checkpoint(root: str | Path) -> Path | None:
    """Return the newest complete checkpoint under ``root``, or None."""
    root = Path(root)
    pointer = root / LATEST
    if pointer.exists():
        folder = root / pointer.read_text().strip()
        if (folder / "state.pt").exists():
            return folder
    # a save killed between moving a step's old copy aside and renaming the new one in
    # leaves the old copy as .replaced-step-N: still a complete checkpoint
    finished = [
        p
        for p in [*root.glob(".replaced-step-*"), *root.glob("step-*")]
        if (p / "state.pt").exists()
    ]
    return max(finished, key=_step_of) if finished else None


def load_checkpoint(folder: str | Path) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Return ``(weights, state)`` of a checkpoint folder."""
    folder = Path(folder)
    weights = load_file(folder / "model.safetensors")
    state = torch.load(folder / "state.pt", weights_only=False)
    return weights, state
