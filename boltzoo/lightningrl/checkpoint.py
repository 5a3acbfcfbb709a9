"""Checkpoints that a killed run can never corrupt.

A checkpoint is a folder ``checkpoints/step-000042`` holding the trained weights
(``model.safetensors``), the optimiser and scheduler states, the RNG states and the config
(``state.pt``: tensors and plain data only, read with ``weights_only=True``, so a run folder from
elsewhere can never run code here; ``latest`` may only name a checkpoint of its own folder). It is
written in full to a hidden temporary folder, flushed to disk, and only then renamed into place;
the file ``checkpoints/latest`` (replaced atomically too) names the newest. A run killed at any
moment leaves either the previous checkpoint or the new one, never half of one: leftover
temporary folders are ignored and removed by the next save. The folders' entries are fsynced
too, so a rename survives a power cut.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from boltzoo.errors import RunFolderError

LATEST = "latest"
_STEP_NAME = re.compile(r"step-\d{6,}")


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
    torch.save(_plain(state), tmp / "state.pt")
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


def _plain(value: Any) -> Any:
    """``value`` with numpy arrays as lists (NumPy's RNG state holds one), so that a safe load
    (``weights_only=True``) reads it back."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_plain(v) for v in value)
    return value


def latest_checkpoint(root: str | Path) -> Path | None:
    """Return the newest complete checkpoint under ``root``, or None.

    Raises:
        RunFolderError: ``latest`` names anything but a checkpoint folder of ``root`` (a path
            elsewhere, ``..``): a run folder never leads outside itself.
    """
    root = Path(root)
    pointer = root / LATEST
    if pointer.is_file():
        name = pointer.read_text(errors="replace").strip()
        if not _STEP_NAME.fullmatch(name):
            raise RunFolderError(
                f"{pointer} names {name[:80]!r}, not a checkpoint of its folder (step-NNNNNN): "
                "a run folder never leads outside itself"
            )
        folder = root / name
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


# What older checkpoints' state.pt hold beyond tensors and plain data: NumPy's RNG state array.
# Rebuilding an array runs no code of the file's choosing.
_NUMPY_ARRAYS = [
    (np._core if hasattr(np, "_core") else np.core).multiarray._reconstruct, np.ndarray, np.dtype,
    type(np.dtype(np.uint32)),
]  # fmt: skip


# What a run writes in its folder: what mixes with a second run's, or misleads beside it.
RUN_FILES = ("metrics.jsonl", "samples.jsonl", "checkpoints", "tensorboard",
             "learning_curve.png", "loss.png", "throughput.png")  # fmt: skip


def logged_steps(output_dir: str | Path) -> list[int]:
    """Return the steps of the rows in a run folder's ``metrics.jsonl`` (none: ``[]``)."""
    path = Path(output_dir) / "metrics.jsonl"
    if not path.is_file():
        return []
    steps = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            steps.append(int(json.loads(line)["step"]))
        except (ValueError, KeyError, TypeError):
            steps.append(-1)  # a row of something, all the same
    return steps


def check_run_folder(output_dir: str | Path, *, resume: bool) -> None:
    """Refuse to start a run where another one is, so that no run's history is ever mixed with
    or overwritten by another's (cheap: it reads no model).

    A folder holds a run when its ``metrics.jsonl`` has rows or ``checkpoints`` has a step.
    Without ``resume`` such a folder is refused; with it, a folder with a checkpoint is resumed,
    and one with no checkpoint is refused unless nothing was trained yet (only the step-0
    evaluation logged: the resumed run does it again).

    Raises:
        RunFolderError: the folder holds a run that this start would mix with; the message says
            how to continue it, start afresh (``--overwrite``) or go elsewhere.
    """
    folder = Path(output_dir)
    if folder.exists() and not folder.is_dir():
        raise RunFolderError(f"output_dir {str(folder)!r} is a file, not a folder")
    steps = logged_steps(folder)
    checkpoints = folder / "checkpoints"
    saved = sorted(p.name for p in checkpoints.glob("step-*")) if checkpoints.is_dir() else []
    if not steps and not saved:
        return
    if resume:
        if latest_checkpoint(checkpoints) is not None:
            return
        if not saved and max(steps) <= 0:
            return
    held = ", ".join(
        ([f"metrics to step {max(steps)}"] if steps else [])
        + ([f"checkpoint {saved[-1]}"] if saved else [])
    )
    how = "and no checkpoint to resume from" if resume else "(--resume continues it)"
    raise RunFolderError(
        f"{folder} holds a run ({held}) {how}: --overwrite starts afresh there, deleting its "
        "metrics and checkpoints, or give another --output-dir"
    )


# The settings that make a run's weights what they are: a run that starts from them takes them.
WEIGHT_SETTINGS = ("model", "lora_r", "lora_alpha", "lora_target_modules")


def init_folders(init_from: str | Path | dict[str, str]) -> dict[str | None, Path]:
    """Return the run folders a warm start reads: ``{None: folder}`` for one run, else
    ``init_from`` itself (policy name -> folder)."""
    if isinstance(init_from, dict):
        return {name: Path(folder) for name, folder in init_from.items()}
    return {None: Path(init_from)}


def adopt_weight_settings(
    config: Any, init_from: str | Path | dict[str, str], given: Any = None
) -> list[Path]:
    """Give ``config`` the model and LoRA settings of the latest checkpoint of ``init_from``'s
    run folders (a warm start needs them all the same); return those checkpoints' folders.

    ``init_from`` is a run folder, or policy name -> run folder (the runs must have trained the
    same model and LoRA settings). A setting in ``given`` (the names set on a command line), or
    without ``given`` one that differs from its default, is the user's: it must equal the
    saved one.

    Raises:
        RunFolderError: no checkpoint in a folder, runs that trained different weights, or a
            setting of the user's that differs from the saved runs' (the message names both).
    """
    import dataclasses

    checkpoints, saved_settings = [], {}
    for run_dir in init_folders(init_from).values():
        folder = latest_checkpoint(run_dir / "checkpoints")
        if folder is None:
            raise RunFolderError(
                f"init_from={str(run_dir)!r}: no checkpoint in {run_dir / 'checkpoints'}"
            )
        try:
            saved = json.loads((folder / "config.json").read_text())
        except (OSError, ValueError) as error:
            raise RunFolderError(f"{folder / 'config.json'} cannot be read: {error}") from None
        checkpoints.append(folder)
        saved_settings[str(run_dir)] = {k: saved[k] for k in WEIGHT_SETTINGS if k in saved}
    first, *others = saved_settings.items()
    for run_dir, settings in others:
        different = {k: v for k, v in settings.items() if first[1].get(k, v) != v}
        if different:
            theirs = {k: first[1][k] for k in different}
            raise RunFolderError(
                f"init_from's runs trained different weights: {run_dir!r} has {different}, "
                f"{first[0]!r} has {theirs}"
            )
    saved = {k: v for settings in saved_settings.values() for k, v in settings.items()}
    defaults = {f.name: f.default for f in dataclasses.fields(config)}
    clashes = []
    for name, value in saved.items():
        if getattr(config, name) == value:
            continue
        mine = name in given if given is not None else getattr(config, name) != defaults[name]
        if mine:
            clashes.append(f"{name}={getattr(config, name)!r} (it has {value!r})")
        else:
            setattr(config, name, value)
    if clashes:
        raise RunFolderError(
            f"init_from={_shown(init_from)} trained other weights than this run asks for: "
            f"{', '.join(clashes)}; leave these settings out to take the run's"
        )
    return checkpoints


def _shown(init_from: str | Path | dict[str, str]) -> str:
    return repr(init_from if isinstance(init_from, dict) else str(init_from))


def clear_run_folder(output_dir: str | Path) -> None:
    """Delete what a run wrote in ``output_dir`` (:data:`RUN_FILES`): ``--overwrite``."""
    folder = Path(output_dir)
    for name in RUN_FILES:
        path = folder / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()


def load_checkpoint(folder: str | Path) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Return ``(weights, state)`` of a checkpoint folder.

    ``state.pt`` is read with ``weights_only=True``: tensors and plain data (and NumPy arrays of
    older checkpoints) only, never code.

    Raises:
        RunFolderError: a file is missing, damaged (truncated, not what its name says) or holds
            objects boltzoo never writes; the message names the file.
    """
    folder = Path(folder)
    with _reading(folder / "model.safetensors"):
        weights = load_file(folder / "model.safetensors")
    return weights, _read_state(folder)


def check_checkpoint(folder: str | Path) -> None:
    """Read what :func:`load_checkpoint` would, but the weights' header only (a full model's
    weights are not read twice): a damaged checkpoint fails here, before any model loads.

    Raises:
        RunFolderError: as :func:`load_checkpoint`.
    """
    folder = Path(folder)
    with _reading(folder / "model.safetensors"):
        with safe_open(folder / "model.safetensors", "pt") as weights:
            weights.keys()
    _read_state(folder)


@contextlib.contextmanager
def _reading(path: Path) -> Iterator[None]:
    try:
        yield
    except Exception as error:  # safetensors raises its own SafetensorError, or OSError
        raise RunFolderError(
            f"{path} cannot be read ({type(error).__name__}: {str(error)[:200]}): a damaged or "
            "foreign checkpoint"
        ) from None


def _read_state(folder: Path) -> dict[str, Any]:
    try:
        with torch.serialization.safe_globals(_NUMPY_ARRAYS):
            state = torch.load(folder / "state.pt", weights_only=True)
    except Exception as error:  # truncated or not a torch file: RuntimeError, OSError, EOFError
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        refused = [line for line in lines if "GLOBAL" in line]  # what weights_only turned away
        if isinstance(error, pickle.UnpicklingError) and refused:
            raise RunFolderError(
                f"{folder / 'state.pt'} holds objects that boltzoo never writes, refused unread "
                f"(a run folder from elsewhere never runs code here): {refused[0][:200]}"
            ) from None
        detail = f"{type(error).__name__}: {lines[0][:160]}" if lines else type(error).__name__
        raise RunFolderError(
            f"{folder / 'state.pt'} cannot be read ({detail}): a damaged checkpoint (a copy cut "
            "short?), or not a checkpoint at all"
        ) from None
    if not isinstance(state, dict):
        raise RunFolderError(f"{folder / 'state.pt'} is not a boltzoo checkpoint's state")
    return state
