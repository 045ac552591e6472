"""A testing hook, not a user feature: stop or slow a dataset writer at a named write step.

    TRACEQL_FAULT=<point>[,<point>...]            SIGKILL this process when it reaches a point
    TRACEQL_DELAY=<point>:<seconds>[,...]         sleep there (to force races between writers)

Points of ``Dataset.add``: ``staged`` (the entry's parquet is complete in .staging/), ``locked`` (the dataset
lock is taken), ``moved`` (the parquet is in data/, dataset.json not rewritten yet), ``recorded`` (dataset.json
renamed into place, the lock not released). Without the variables, :func:`point` does nothing.
"""

from __future__ import annotations

import os
import signal
import time


def point(name: str) -> None:
    """A named write step: die or sleep here when the environment asks for it."""
    if name in os.environ.get("TRACEQL_FAULT", "").split(","):
        os.kill(os.getpid(), signal.SIGKILL)
    for item in filter(None, os.environ.get("TRACEQL_DELAY", "").split(",")):
        where, _, seconds = item.rpartition(":")
        if where == name:
            time.sleep(float(seconds))
