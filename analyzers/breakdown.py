"""Per-rank time breakdown and communication/computation overlap (Holistic Trace Analysis definitions).

- ``comm_comp_overlap_pct``: time where compute and communication kernels run together / time
  communication runs, × 100 (unions of intervals per rank).
- ``span_ns``: first GPU activity start to last end; ``idle_ns``: span minus the union of all GPU activity;
  ``compute_ns``/``comm_ns``/``memory_ns``: unions of compute kernels, comm kernels, memcpy+memset;
  ``non_compute_ns`` = span − idle − compute.
"""

from __future__ import annotations

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
