"""The process's memory: what it holds now, and handing freed heap pages back to the OS.

On a CPU every rollout and every update allocates tensors of new sizes (prompts, responses and
micro-batches differ from step to step). glibc's allocator keeps freed blocks for reuse instead
of returning them, and the fragments pile up: a sql-v0 RL run held 2.9 GB between steps after
its first step and 7.6 GB after its 49th, every tensor of those steps freed, and peaked at
9.1 GB. The trainers trim the heap after each step; resumed from that checkpoint with the trim,
the same run held 1.4-2.1 GB between steps and peaked at 6.5 GB over 31 steps (BENCHMARKS.md).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import resource


def rss_mib() -> float | None:
    """Return the process's resident memory in MiB now (None where /proc is missing)."""
    try:
        with open("/proc/self/statm") as statm:
            pages = int(statm.read().split()[1])
    except OSError:
        return None
    return pages * resource.getpagesize() / 2**20


def peak_rss_mib() -> float:
    """Return the most resident memory the process has held so far, in MiB (Linux units)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@functools.cache
def _malloc_trim():
    name = ctypes.util.find_library("c")
    library = ctypes.CDLL(name) if name else None
    return getattr(library, "malloc_trim", None)  # glibc only (not musl, not macOS)


def release_freed_memory() -> bool:
    """Return the C heap's free pages to the OS (glibc's ``malloc_trim(0)``); return whether
    any were (False where the C library has no ``malloc_trim``)."""
    trim = _malloc_trim()
    return bool(trim(0)) if trim is not None else False
