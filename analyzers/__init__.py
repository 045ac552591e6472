"""Pure analyses over the normalized model's frames: overlap, baselines, features, detector (imports no traceql)."""

import os


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1
