"""Per-rank time breakdown and communication/computation overlap (Holistic Trace Analysis definitions).

- ``comm_comp_overlap_pct``: time where compute and communication kernels run together / time
  communication runs, × 100 (unions of intervals per rank).
- ``span_ns``: first GPU activity start to last end; ``idle_ns``: span minus the union of all GPU activity;
  ``compute_ns``/``comm_ns``/``memory_ns``: unions of compute kernels, comm kernels, memcpy+memset;
  ``non_compute_ns`` = span − idle − compute.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import polars as pl

from traceql.analyzers.intervals import intersection_length, union_length

RANK_KEY = ["run_id", "rank"]


def _arrays(df: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    return df["start_ns"].to_numpy(), df["end_ns"].to_numpy()


def rank_breakdown(kernels: pl.DataFrame, memops: pl.DataFrame) -> pl.DataFrame:
    """One row per (run_id, rank): the time breakdown and the comm/compute overlap percentage."""
    cols = [*RANK_KEY, "start_ns", "end_ns", "kind"]
    activity = pl.concat([kernels.select(cols), memops.select(cols)])
    rows = []
    for (run_id, rank), grp in activity.group_by(RANK_KEY, maintain_order=True):
        comp = grp.filter(pl.col("kind") == "compute")
        comm = grp.filter(pl.col("kind") == "comm")
        mem = grp.filter(pl.col("kind").is_in(["memcpy", "memset"]))
        span = int(grp["end_ns"].max() - grp["start_ns"].min())
        busy = union_length(*_arrays(grp))
        compute = union_length(*_arrays(comp))
        comm_ns = union_length(*_arrays(comm))
        both = intersection_length(*_arrays(comp), *_arrays(comm))
        rows.append({
            "run_id": run_id, "rank": rank, "span_ns": span, "busy_ns": busy, "idle_ns": span - busy,
            "compute_ns": compute, "comm_ns": comm_ns, "memory_ns": union_length(*_arrays(mem)),
            "non_compute_ns": span - (span - busy) - compute, "comm_compute_overlap_ns": both,
            "comm_comp_overlap_pct": round(100.0 * both / comm_ns, 2) if comm_ns else None,
        })
    return pl.DataFrame(rows, schema_overrides={"rank": pl.Int32}).sort(RANK_KEY)


CATEGORIES = {"busy": "TRUE", "compute": "kind = 'compute'", "comm": "kind = 'comm'",
              "memory": "kind IN ('memcpy', 'memset')", "both": "kind IN ('compute', 'comm')"}


def _union_sql(table: str, where: str) -> str:
    """SQL: per (run_id, rank), the length of the union of the intervals of ``table`` that ``where`` holds for:
    in start order, each interval adds what reaches past every earlier one's end."""
    return f"""SELECT run_id, rank, sum(greatest(0, end_ns - greatest(start_ns, coalesce(reach, start_ns)))) AS n
               FROM (SELECT run_id, rank, start_ns, end_ns,
                            max(end_ns) OVER (PARTITION BY run_id, rank ORDER BY start_ns, end_ns
                                              ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
                     FROM {table} WHERE {where})
               GROUP BY run_id, rank"""


def rank_breakdown_sql(sql: Callable[[str], pl.DataFrame], table: str) -> pl.DataFrame:
    """:func:`rank_breakdown` of the activity in a SQL table (``run_id, rank, start_ns, end_ns, kind``: every
    kernel and memory operation of the ranks, valid), computed where it lies (``sql`` runs a query): the same
    figures, without the activity in memory (a rank too large to hold)."""
    spans = sql(f"SELECT run_id, rank, max(end_ns) - min(start_ns) AS span_ns FROM {table} GROUP BY ALL")
    for name, where in CATEGORIES.items():
        spans = spans.join(sql(_union_sql(table, where)).rename({"n": f"_{name}"}), on=RANK_KEY, how="left")
    zero = {c: pl.col(f"_{c}").fill_null(0).cast(pl.Int64) for c in CATEGORIES}
    both = zero["compute"] + zero["comm"] - zero["both"]  # |A ∩ B| = |A| + |B| − |A ∪ B|
    span = pl.col("span_ns").cast(pl.Int64)
    return spans.select(
        "run_id", pl.col("rank").cast(pl.Int32), span.alias("span_ns"), zero["busy"].alias("busy_ns"),
        (span - zero["busy"]).alias("idle_ns"), zero["compute"].alias("compute_ns"), zero["comm"].alias("comm_ns"),
        zero["memory"].alias("memory_ns"), (zero["busy"] - zero["compute"]).alias("non_compute_ns"),
        both.alias("comm_compute_overlap_ns"),
        pl.when(zero["comm"] > 0).then((100.0 * both / zero["comm"]).round(2)).alias("comm_comp_overlap_pct"),
    ).sort(RANK_KEY)
