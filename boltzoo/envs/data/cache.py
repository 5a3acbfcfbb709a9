"""Where boltzoo keeps files it builds or downloads once (databases, indexes, data sets)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["cache_dir", "write_folder"]


def cache_dir(*parts: str) -> Path:
    """Return (creating it) ``$BOLTZOO_CACHE/<parts>``, or ``~/.cache/boltzoo/<parts>``."""
    root = os.environ.get("BOLTZOO_CACHE")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "boltzoo"
    path = base.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_folder(target: str | os.PathLike, build: Callable[[Path], None]) -> Path:
    """Write the folder ``target`` with ``build(tmp)`` into a temporary sibling, then rename it
    into place (replacing an old one), so that no reader ever sees a half-written folder."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        build(tmp)
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target
