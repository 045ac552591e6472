"""Training steps: which step launched each kernel and memory operation, and the ``steps`` relation.

A step is an annotation range on the CPU: NVTX ``step_<i>`` (``step_<i>_nosync`` for an *isolated* step, run
with communication off) or, in a Kineto trace without those, ``ProfilerStep#<i>``; or the ranges a pattern
asked for matches (``step_marker``). A kernel belongs to the
step whose range holds the start of the CUDA API call that launched it (``launch_ns``, found through the
correlation id), on any thread of the same process (rank): GPU work of step i often runs while the CPU is
already in step i+1, so GPU time never decides. Kernels launched outside every step have no step. A range whose
step number is past 32 bits is no step: it is ignored, with a warning.
"""

from __future__ import annotations

import duckdb
import numpy as np
import polars as pl

from traceql.model import step_marker
from traceql.model.validate import where

NAMED = r"^step_([0-9]+)(_nosync)?$"
PROFILER_STEP = r"^ProfilerStep#([0-9]+)$"
GPU_SIDE = "gpu_user_annotation"  # Kineto's copy of an annotation on the GPU timeline: not a CPU range

MARKS = f"""
    WITH m AS (
        SELECT run_id, rank, start_ns, end_ns,
               regexp_extract(text, '{NAMED}', 1) AS named, regexp_extract(text, '{NAMED}', 2) AS nosync,
               regexp_extract(text, '{PROFILER_STEP}', 1) AS profiler, text
        FROM nvtx
        WHERE end_ns > start_ns AND coalesce(domain, '') <> '{GPU_SIDE}'
          AND (regexp_matches(text, '{NAMED}') OR regexp_matches(text, '{PROFILER_STEP}'))
    ), ranked AS (  -- a rank with step_<i> ranges uses those, else its ProfilerStep#<i> ranges
        SELECT *, bool_or(named <> '') OVER (PARTITION BY run_id, rank) AS has_named FROM m
    )
    SELECT run_id, rank, TRY_CAST(CASE WHEN has_named THEN named ELSE profiler END AS INTEGER) AS step,
           CASE WHEN nosync <> '' THEN 'isolated' ELSE 'sync' END AS step_kind,
           min(start_ns) AS cpu_start_ns, max(end_ns) AS cpu_end_ns,
           count(*) AS ranges, min(text) AS example
    FROM ranked WHERE (named <> '') = has_named
    GROUP BY run_id, rank, step, step_kind
"""


def marks_sql() -> str:
    """The step ranges of the ``nvtx`` relation: the default markers (:data:`MARKS`), or those of the pattern
    asked for (``step_marker``): its capture group the step's number, else each rank's ranges in order."""
    asked = step_marker.pattern()
    if asked is None:
        return MARKS
    p = asked.replace("'", "''")
    number = (f"TRY_CAST(regexp_extract(text, '{p}', 1) AS INTEGER)" if step_marker.groups(asked)
              else "CAST(row_number() OVER (PARTITION BY run_id, rank ORDER BY start_ns, end_ns) AS INTEGER)")
    return f"""
    WITH m AS (
        SELECT run_id, rank, start_ns, end_ns, text, {number} AS step
        FROM nvtx
        WHERE end_ns > start_ns AND coalesce(domain, '') <> '{GPU_SIDE}' AND regexp_matches(text, '{p}')
    )
    SELECT run_id, rank, step, 'sync' AS step_kind, min(start_ns) AS cpu_start_ns, max(end_ns) AS cpu_end_ns,
           count(*) AS ranges, min(text) AS example
    FROM m GROUP BY run_id, rank, step
"""


def _assign(rows: pl.DataFrame, marks: pl.DataFrame) -> pl.DataFrame:
    """``rows`` (sorted by run and rank) with ``step``/``step_kind``: the latest step of the same run and rank
    starting at or before the launch, when its range still holds the launch; found by binary search."""
    steps, kinds, offset = [], [], 0
    groups = rows.group_by("run_id", "rank", maintain_order=True).len()
    by_rank = marks.partition_by("run_id", "rank", as_dict=True, maintain_order=True)
    for run_id, rank, n in groups.iter_rows():
        offset, start = offset + n, offset
        mine = by_rank.get((run_id, rank))
        if mine is None:
            steps.append(pl.repeat(None, n, dtype=pl.Int32, eager=True))
            kinds.append(pl.repeat(None, n, dtype=pl.String, eager=True))
            continue
        launch = rows["launch_ns"].slice(start, n)
        at = np.searchsorted(mine["cpu_start_ns"].to_numpy(), launch.fill_null(0).to_numpy(), side="right") - 1
        held = pl.Series(at >= 0) & launch.is_not_null()
        index = pl.Series(np.maximum(at, 0))
        held &= launch.fill_null(0) <= mine["cpu_end_ns"].gather(index)
        steps.append(mine["step"].gather(index).zip_with(held, pl.repeat(None, n, dtype=pl.Int32, eager=True)))
        kinds.append(mine["step_kind"].gather(index).zip_with(held, pl.repeat(None, n, dtype=pl.String, eager=True)))
    return rows.with_columns(step=pl.concat(steps) if steps else pl.Series([], dtype=pl.Int32),
                             step_kind=pl.concat(kinds) if kinds else pl.Series([], dtype=pl.String))


def _ignored(con: duckdb.DuckDBPyConnection) -> list[str]:
    """One warning per run for its step ranges whose number is past 32 bits (``step_3000000000``), which are
    left out of ``_marks``: no step has that number."""
    bad = con.execute("SELECT run_id, sum(ranges), min(example) FROM _marks WHERE step IS NULL "
                      "GROUP BY run_id ORDER BY run_id").fetchall()
    if bad:
        con.execute("DELETE FROM _marks WHERE step IS NULL")
    return [f"warning: {where(con, run_id)}: nvtx: {int(n):,} step ranges ignored with a step number past "
            f"{2**31 - 1:,} (e.g. {example[:60]})" for run_id, n, example in bad]


def attribute(con: duckdb.DuckDBPyConnection, frames: dict[str, pl.DataFrame]) -> tuple[dict[str, pl.DataFrame],
                                                                                        list[str]]:
    """Give every kernel and memory operation (frames sorted by run and rank) its step; the warnings on step
    ranges that were ignored."""
    con.execute(f"CREATE OR REPLACE TEMP TABLE _marks AS {marks_sql()}")
    notes = _ignored(con)
    marks = con.sql("SELECT * EXCLUDE (ranges, example) FROM _marks "
                    "ORDER BY run_id, rank, cpu_start_ns, step, step_kind").pl()
    return {table: _assign(rows, marks) for table, rows in frames.items()}, notes


def fill(con: duckdb.DuckDBPyConnection) -> None:
    """Fill the ``steps`` relation, once the activities are in the model with their steps."""
    con.execute("""
        INSERT INTO steps
        SELECT m.run_id, m.rank, m.step, m.step_kind, m.cpu_start_ns, m.cpu_end_ns, g.gpu_start_ns, g.gpu_end_ns
        FROM _marks m LEFT JOIN (
            SELECT run_id, rank, step, step_kind, min(start_ns) AS gpu_start_ns, max(end_ns) AS gpu_end_ns
            FROM (SELECT run_id, rank, step, step_kind, start_ns, end_ns FROM kernels
                  UNION ALL SELECT run_id, rank, step, step_kind, start_ns, end_ns FROM memcpy)
            WHERE step IS NOT NULL GROUP BY ALL
        ) g USING (run_id, rank, step, step_kind)
    """)
    con.execute("DROP TABLE _marks")
