"""The one exception the collectors raise for anything a user can fix, and the interrupt they turn into one."""

from __future__ import annotations

STAGES = ("input", "environment", "run", "interrupted")


class CollectError(Exception):
    """A collection that cannot start or did not finish; ``str(err)`` is one line, ``detail`` may add more.

    ``stage``: ``input`` (the input folder or an option is wrong), ``environment`` (this machine cannot run
    it: no GPU, no profiler binary, a CUDA or torch mismatch), ``run`` (it ran: a rank failed, a timeout) or
    ``interrupted`` (Ctrl-C or SIGTERM while it ran: every rank was stopped and the manifest written).
    Nothing is launched before a ``run`` error.
    """

    def __init__(self, message: str, *, detail: str = "", stage: str = "input") -> None:
        if stage not in STAGES:
            raise ValueError(f"stage must be one of {STAGES}, got {stage!r}")
        super().__init__(message)
        self.detail = detail
        self.stage = stage


class Interrupted(KeyboardInterrupt):
    """A signal that ends a collection (SIGTERM, SIGHUP; SIGINT too while the ranks run), raised as Ctrl-C is:
    whatever catches KeyboardInterrupt treats it the same. ``signal`` names it."""

    def __init__(self, signal: str) -> None:
        super().__init__(signal)
        self.signal = signal
