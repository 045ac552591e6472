"""What this process may run on: its cores, and the threads its work may use at once."""

from __future__ import annotations

import os


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def threads() -> int:
    """The threads this process's work may run at once: ``$OMP_NUM_THREADS`` where set (a worker's share of its
    machine, or the user's own limit), else one a core."""
    given = os.environ.get("OMP_NUM_THREADS", "").strip()
    return int(given) if given.isdigit() and int(given) > 0 else cores()
