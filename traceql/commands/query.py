"""`traceql query`: SQL over the normalized model of some trace files."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import polars as pl

from traceql.errors import QueryError
from traceql.export.files import write_frame
from traceql.sources.inputs import DEFAULT_TRACE
from traceql.sources.outputs import check_file_output
from traceql.trace import read_trace


def run_query(paths: Sequence[str | Path], sql: str, *, notes: list[str] | None = None,
              output: str | Path | None = None, fmt: str = "parquet", limit: int | None = None) -> pl.DataFrame:
    """Open ``paths`` (the embedded default when empty) and return the result of ``sql`` as a frame; what
    reading had to do differently is appended to ``notes``. The SQL runs over the model alone: it cannot
    read or write files, attach databases or load extensions. With ``output``, the result is also written
    there (in ``fmt``: parquet, csv or json), atomically; it may not be an input. ``limit``: only the first
    rows are computed and returned (a table shows no more)."""
    if not sql.strip():
        raise QueryError("empty SQL query")
    if output is not None:
        check_file_output(output, "--output", list(paths) or [DEFAULT_TRACE])
    with read_trace(list(paths) or None) as trace:
        if notes is not None:
            notes.extend(trace.notes)
        df = trace.sql(sql, limit=limit)
    if output is not None:
        write_frame(df, Path(output), fmt)
    return df
