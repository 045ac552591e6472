"""The compiled passes (``compiled``) loaded ahead of a large replay, on a thread of their own: numba
imported and each pass's machine code read from its cache (or compiled) while the command does other work
(say, names a run's stragglers from its labels, kept in the cache), instead of in the first windows it
replays (about 0.3 s of a process's first replay)."""

from __future__ import annotations

import atexit
import contextlib
import threading

import numpy as np

from traceql.analyzers.replay.compiled import _bound_pass, _lanes_pass, _pass

_STARTED: list[threading.Thread] = []


def warm() -> threading.Thread:
    """Start loading the compiled passes (once a process); the thread doing it. Each pass is called on an empty
    graph with its arguments' types as a replay gives them, which loads that pass's code. A process that ends
    first waits for it (numba's compiler is never left running while the interpreter shuts down); a failure is
    left for the replay that calls the pass to meet and say."""
    if not _STARTED:
        _STARTED.append(threading.Thread(target=_load, name="traceql-warm", daemon=True))
        _STARTED[0].start()
        atexit.register(_STARTED[0].join)
    return _STARTED[0]


def _load() -> None:
    with contextlib.suppress(Exception):
        _passes()


def _passes() -> None:
    none, flag = np.zeros(0, np.int64), np.zeros(0, np.bool_)
    arrays = [np.zeros(1, np.int64) for _ in range(9)]
    _pass(_lanes_pass, True)(none, np.zeros(1, np.int64), *arrays, flag, False, 0, np.zeros(1, np.int64),
                             np.zeros(1, np.int64))
    _pass(_bound_pass, True)(0, none, none, none, none, none)
