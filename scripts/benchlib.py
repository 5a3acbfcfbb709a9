"""What every benchmark script shares: how it names the machine and records its results."""

from __future__ import annotations

import json
import os
import platform
import shlex
import sys
from datetime import date
from pathlib import Path
from typing import Any


def machine_description() -> str:
    """Return the CPU model, core count, memory, GPU (if any) and Python version, in one line."""
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
