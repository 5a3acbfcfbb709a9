"""Where boltzoo keeps files it builds or downloads once (databases, indexes, data sets)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_dir"]


def cache_dir(*parts: str) -> Path:
    """Return (creating it) ``$BOLTZOO_CACHE/<parts>``, or ``~/.cache/boltzoo/<parts>``."""
    root = os.environ.get("BOLTZOO_CACHE")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "boltzoo"
    path = base.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path
