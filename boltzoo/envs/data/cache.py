"""Where boltzoo keeps files it builds or downloads once (databases, indexes, data sets)."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

__all__ = ["BoundedCache", "cache_dir", "write_folder"]


def cache_dir(*parts: str) -> Path:
    """Return (creating it) ``$BOLTZOO_CACHE/<parts>``, or ``~/.cache/boltzoo/<parts>``."""
    root = os.environ.get("BOLTZOO_CACHE")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "boltzoo"
    path = base.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


class BoundedCache:
    """A process-wide cache of at most ``maxsize`` entries (the least recently used go first),
    safe across threads: what envs share (gold results, search indexes) without growing for as
    long as the process lives."""

    def __init__(self, maxsize: int):
        self.maxsize = maxsize
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, make: Callable[[], Any]) -> Any:
        """Return the entry of ``key``, made by ``make()`` (outside the lock) when missing."""
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        value = make()
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.maxsize:
                self._items.popitem(last=False)
        return value

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._items.clear()


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
