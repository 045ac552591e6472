"""The libraries a command reads traces with, loaded before it runs with Ctrl-C held back: a Ctrl-C that lands
while polars loads makes it panic (its start-up code unwraps the KeyboardInterrupt: exit 1 and a Rust
backtrace), and one that lands in an extension module's initialization leaves it half made (DuckDB's, imported
again, fails: "type ... is already registered"). Held back, the Ctrl-C is answered as soon as they are loaded,
where the command line answers it (``error: interrupted``, exit 130).

Blocking the signal would not do: another thread (a module preloaded beside the command) takes it, and Python
raises it in the main thread all the same. A handler that notes it and returns does: nothing is raised
until it is put back."""

from __future__ import annotations

import importlib
import signal
import threading
from collections.abc import Iterable
from types import FrameType

LIBRARIES = ("numpy", "polars", "duckdb")  # the first that every reading command loads (collect: none needed)


def load(names: Iterable[str] = LIBRARIES) -> None:
    """Import ``names`` (those installed) with a Ctrl-C held back until they are loaded, then answered as the
    handler before would have (the default: KeyboardInterrupt). Off the main thread, where no handler can be
    set, they are imported as they come."""
    if threading.current_thread() is not threading.main_thread():
        _imported(names)
        return
    came: list[FrameType | None] = []
    before = signal.signal(signal.SIGINT, lambda _signum, frame: came.append(frame))
    try:
        _imported(names)
    finally:
        signal.signal(signal.SIGINT, before)
    if not came:
        return
    if callable(before):
        before(signal.SIGINT, came[0])
    elif before == signal.SIG_DFL:
        signal.raise_signal(signal.SIGINT)


def _imported(names: Iterable[str]) -> None:
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:  # not installed (collect's own environment): the command says so if it needs it
            continue
