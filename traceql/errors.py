"""One exception family: every failure a user can cause ends here, with a message fit for stderr.

Exit codes: 1 other, 2 unreadable input or a bad option value, 3 a trace missing what is needed, 4 a failed
query, 5 a collection the environment cannot run, 6 a collection that ran and failed, 70 a bug in traceql,
130 interrupted (Ctrl-C, or SIGTERM during a collection).
"""

from __future__ import annotations

INTERNAL_ERROR = 70
INTERRUPTED = 130


class TraceqlError(Exception):
    """A user-facing failure: ``str(err)`` is one line naming the input and what is wrong."""

    exit_code = 1

    def __init__(self, message: str, *, path: str | None = None) -> None:
        self.path = path
        super().__init__(f"{path}: {message}" if path else message)


class InputError(TraceqlError):
    """The input path cannot be read as a trace (missing, wrong format, corrupt)."""

    exit_code = 2


class OptionError(TraceqlError):
    """An option's value is out of its domain (``--threshold 0.5``); nothing was read."""

    exit_code = 2


class SchemaError(TraceqlError):
    """The input is a trace, but lacks what the model needs; the message names the likely capture cause."""

    exit_code = 3


class QueryError(TraceqlError):
    """A SQL query over the model failed; the message is DuckDB's."""

    exit_code = 4


class CollectFailed(TraceqlError):
    """A collection that could not start or did not finish; ``detail``, rarely set, holds the launcher log's
    tail when it failed before any rank started (a failed rank's line names its exception and its log).

    ``stage`` says which: ``input`` (the input folder or an option: exit 2), ``environment`` (no GPU, no
    profiler, a CUDA mismatch: exit 5), ``run`` (a rank failed, the run timed out: exit 6) or ``interrupted``
    (Ctrl-C or SIGTERM while it ran: every rank stopped, manifest status ``interrupted``: exit 130).
    """

    EXIT_CODES = {"input": 2, "environment": 5, "run": 6, "interrupted": INTERRUPTED}

    def __init__(self, message: str, *, detail: str = "", stage: str = "input") -> None:
        super().__init__(message)
        self.detail = detail
        self.stage = stage
        self.exit_code = self.EXIT_CODES[stage]
