"""Physical invariants of the loaded activities, checked columnar once every source is in.

Values that do not fit the model's column types are kept as NULL, each column with one warning. Rows that
cannot be a GPU activity — no start or end, a duration out of range, an end before the start — and exact
duplicate rows are dropped, each kind with one warning naming the file, the relation, how many rows and one
example. A trace with nothing usable left, or whose kernels all last 0 ns (no durations recorded), is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

import duckdb
import polars as pl

from traceql.errors import SchemaError
from traceql.model import schema
from traceql.model.schema import Schema

if TYPE_CHECKING:
    from polars._typing import PolarsDataType

CHECKS = [("no start or end time", pl.col("start_ns").is_null() | pl.col("end_ns").is_null()),
          ("a duration out of range", pl.col("duration_ns").is_null()),
          ("an end before its start", pl.col("end_ns") < pl.col("start_ns"))]
WHAT = {"kernels": pl.coalesce(pl.col("short_name").cast(pl.String), pl.col("name").cast(pl.String), pl.lit("?")),
        "memcpy": pl.col("copy_kind").fill_null("?")}


def where(con: duckdb.DuckDBPyConnection, run_id: str | None) -> str:
    """The files of a run, as a warning names them."""
    paths = [r[0] for r in con.execute("SELECT path FROM runs WHERE run_id IS NOT DISTINCT FROM ? ORDER BY path",
                                       [run_id]).fetchall()]
    return ", ".join(paths) if paths else str(run_id)


def narrowed(con: duckdb.DuckDBPyConnection, table: str, rows: pl.DataFrame,
             types: Schema) -> tuple[pl.DataFrame, list[str]]:
    """One source's rows of an activity relation in the model's column types: a value out of its column's range
    (a device id or a grid size past 32 bits) is kept as NULL, with one warning per column naming the file."""
    dtypes: Mapping[Any, PolarsDataType] = types  # polars' cast takes column selectors as keys too
    typed = rows.cast(dtypes, strict=False)
    notes = []
    for c in types:
        if typed[c].null_count() > rows[c].null_count():
            lost = rows.filter(rows[c].is_not_null() & typed[c].is_null())
            notes.append(f"warning: {where(con, lost['run_id'][0])}: {table}: {lost.height:,} values of {c} out of "
                         f"its range kept as NULL (e.g. {lost[c][0]})")
    return typed, notes


def _may_repeat(rows: pl.DataFrame, table: str) -> bool:
    """Whether two rows share their place and time (run, rank, device, stream, start, end, correlation id),
    which exact duplicates do: sorted by those (``schema.ORDER_BY``), such rows are next to each other. A cheap
    test before comparing every column."""
    keys = schema.order(table)
    before, after = rows.select(keys).slice(0, max(rows.height - 1, 0)), rows.select(keys).slice(1)
    return bool(pl.select(pl.all_horizontal([before[c].eq_missing(after[c]) for c in keys]).any()).item())


def _drop_invalid(con: duckdb.DuckDBPyConnection, table: str, rows: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    notes = []
    for why, condition in CHECKS:
        bad = rows.filter(condition)
        if bad.is_empty():
            continue
        per_run = bad.group_by("run_id", maintain_order=True).agg(
            pl.len().alias("n"), WHAT[table].first().alias("example"), pl.col("start_ns").first().alias("s"),
            pl.col("end_ns").first().alias("e")).sort("run_id", nulls_last=True)
        for run_id, n, example, s, e in per_run.iter_rows():
            notes.append(f"warning: {where(con, run_id)}: {table}: {n:,} rows dropped with {why} "
                         f"(e.g. {example}, start {s}, end {e})")
        rows = rows.filter(~condition.fill_null(False))
    if _may_repeat(rows, table):
        dup = rows.height - rows.n_unique()
        if dup:
            example = rows.filter(rows.is_duplicated()).select("run_id", WHAT[table], "start_ns").row(0)
            notes.append(f"warning: {where(con, example[0])}: {table}: {dup:,} exact duplicate rows dropped "
                         f"(e.g. {example[1]} at {example[2]})")
            rows = rows.unique(maintain_order=True)
    return rows, notes


def check(con: duckdb.DuckDBPyConnection, frames: dict[str, pl.DataFrame]) -> tuple[dict[str, pl.DataFrame],
                                                                                    list[str]]:
    """The activity frames (each sorted by ``schema.ORDER_BY``) without what cannot be an activity, in the same
    order, and the warnings; SchemaError when no usable kernel is left."""
    before = frames["kernels"].height
    notes = []
    for table in ("kernels", "memcpy"):
        frames[table], dropped = _drop_invalid(con, table, frames[table])
        notes += dropped
    kernels = frames["kernels"]
    after, longest = kernels.height, kernels["duration_ns"].max()
    first = where(con, cast("tuple[Any]", con.execute("SELECT min(run_id) FROM runs").fetchone())[0])  # one row
    if before and not after:
        raise SchemaError(f"none of its {before:,} kernels has usable times ({notes[0].split(': ', 3)[-1]})",
                          path=first)
    if after and longest == 0:
        raise SchemaError(f"every one of its {after:,} kernels lasts 0 ns: the trace records no durations "
                          "(a Kineto trace without \"dur\"?)", path=first)
    return frames, notes
