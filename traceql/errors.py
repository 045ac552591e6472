"""One exception family: every failure a user can cause ends here, with a message fit for stderr."""

from __future__ import annotations


class TraceqlError(Exception):
    """A user-facing failure: ``str(err)`` is one line naming the input and what is wrong."""

    exit_code = 1

    def __init__(self, message: str, *, path: str | None = None) -> None:
        self.path = path
        super().__init__(f"{path}: {message}" if path else message)


class InputError(TraceqlError):
    """The input path cannot be read as a trace (missing, wrong format, corrupt)."""

    exit_code = 2


class SchemaError(TraceqlError):
    """The input is a trace, but lacks what the model needs; the message names the likely capture cause."""

    exit_code = 3


class QueryError(TraceqlError):
    """A SQL query over the model failed; the message is DuckDB's."""

    exit_code = 4
