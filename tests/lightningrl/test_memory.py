"""The trainers hand freed heap memory back to the OS after each step."""

from __future__ import annotations

import pytest

from boltzoo.lightningrl import memory


@pytest.mark.skipif(memory._malloc_trim() is None, reason="the C library has no malloc_trim")
def test_freed_heap_memory_goes_back_to_the_os():
    # Fragment the heap as a training step does: 256 MB of 32 KiB blocks (below glibc's mmap
    # threshold, so on the heap), written so that they are resident, and every 16th kept: the
    # free blocks between the kept ones stay with the process until they are trimmed.
    blocks = [b"x" * (32 * 1024) for _ in range(8192)]
    kept = blocks[::16]
    del blocks
    before = memory.rss_mib()
    assert memory.release_freed_memory()
    after = memory.rss_mib()
    assert before - after > 150, (before, after)
    assert len(kept) == 512  # (held until here)


def test_peak_memory_is_at_least_what_the_process_holds_now():
    assert memory.peak_rss_mib() >= memory.rss_mib() > 0
