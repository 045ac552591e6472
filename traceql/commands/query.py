"""`traceql query`: SQL over the normalized model of some trace files."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from traceql.comms.relation import collectives
from traceql.errors import OptionError, QueryError
from traceql.export.files import write_frame
from traceql.sources.inputs import DEFAULT_TRACE
from traceql.sources.outputs import check_file_output
from traceql.trace import read_trace

# a query that names the collectives relation, or lists the relations (it is made only then: it costs a pass)
NAMES_COLLECTIVES = re.compile(r"\bcollectives\b|\bshow\s+(all\s+)?tables\b|\binformation_schema\b|\bduckdb_tables\b",
                               re.IGNORECASE)
_SQL_START = ("select", "with", "from", "describe", "show", "summarize", "pivot", "unpivot", "values", "explain",
              "table")  # how a query begins (DuckDB's dialect)


def _looks_like_sql(text: str) -> bool:
    words = text.strip().split(maxsplit=1)
    return bool(words) and words[0].lower().rstrip("(") in _SQL_START


def split_args(args: Sequence[str]) -> tuple[list[Path], str]:
    """`query`'s arguments as (trace files, SQL): the files first, the SQL last; a clear error where the SQL is
    missing (only files given) or came first.

    Args:
        args: the command line's arguments: trace files, then the SQL (at least the SQL).

    Returns:
        The trace files (none: the embedded default) and the SQL.

    Raises:
        OptionError: where the last argument is an existing file, not SQL: the SQL came first, or is missing.
    """
    *paths, sql = args
    if not _looks_like_sql(sql) and Path(sql).exists():
        first = next((a for a in paths if _looks_like_sql(a)), None)
        if first is not None:
            raise OptionError(f"the SQL comes last: traceql query FILE... '{first}'")
        raise OptionError(f"{sql} is a trace, and no SQL follows it: traceql query [FILE]... SQL (the SQL last)")
    return [Path(p) for p in paths], sql


def run_query(paths: Sequence[str | Path], sql: str, *, notes: list[str] | None = None,
              output: str | Path | None = None, fmt: str = "parquet", limit: int | None = None) -> pl.DataFrame:
    """Open ``paths`` (the embedded default when empty) and return the result of ``sql`` as a frame; what
    reading had to do differently is appended to ``notes``. The SQL runs over the model alone: it cannot
    read or write files, attach databases or load extensions. With ``output``, the result is also written
    there (in ``fmt``: parquet, csv or json), atomically; it may not be an input. ``limit``: only the first
    rows are computed and returned (a table shows no more).

    Args:
        paths: the trace files or folders (none: the embedded example).
        sql: the query (DuckDB's dialect) over the model's relations, and ``collectives`` where it names it (or
            lists the relations: ``SHOW TABLES``).
        notes: a list the notes of reading (and of making ``collectives``) are appended to; None: dropped.
        output: a file to write the result to as well; not an input.
        fmt: ``output``'s format: ``parquet``, ``csv`` or ``json``.
        limit: compute and return only this many rows; None: all.

    Returns:
        The query's result.

    Raises:
        QueryError: for an empty query, or one that fails (reading files, attaching databases, loading
            extensions included).
        OptionError: for an ``output`` that is an input or cannot be written.
    """
    if not sql.strip():
        raise QueryError("empty SQL query")
    if output is not None:
        check_file_output(output, "--output", list(paths) or [DEFAULT_TRACE])
    with read_trace(list(paths) or None) as trace:
        if notes is not None:
            notes.extend(trace.notes)
        if NAMES_COLLECTIVES.search(sql):  # a relation made from the model when a query names it
            made = collectives(trace)
            trace.add_relation("collectives", made.rows)
            if notes is not None and re.search(r"\bcollectives\b", sql, re.IGNORECASE):  # its notes where named
                notes.extend(made.notes)
        df = trace.sql(sql, limit=limit)
    if output is not None:
        write_frame(df, Path(output), fmt)
    return df
