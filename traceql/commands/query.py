"""`traceql query`: SQL over the normalized model of some trace files."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import polars as pl

from traceql.errors import QueryError
from traceql.trace import read_trace


def run_query(paths: Sequence[str | Path], sql: str) -> pl.DataFrame:
    """Open ``paths`` (the embedded default when empty) and return the result of ``sql`` as a frame."""
    if not sql.strip():
        raise QueryError("empty SQL query")
    with read_trace(list(paths) or None) as trace:
        return trace.sql(sql)
