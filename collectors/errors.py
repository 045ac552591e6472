"""The one exception the collectors raise for anything a user can fix."""

from __future__ import annotations

STAGES = ("input", "environment", "run")


class CollectError(Exception):
    """A collection that cannot start or did not finish; ``str(err)`` is one line, ``detail`` may add more.

    ``stage``: ``input`` (the input folder or an option is wrong), ``environment`` (this machine cannot run
    it: no GPU, no profiler binary, a CUDA or torch mismatch) or ``run`` (it ran: a rank failed, a timeout).
    Nothing is launched before a ``run`` error.
    """

    def __init__(self, message: str, *, detail: str = "", stage: str = "input") -> None:
        if stage not in STAGES:
            raise ValueError(f"stage must be one of {STAGES}, got {stage!r}")
        super().__init__(message)
        self.detail = detail
        self.stage = stage
