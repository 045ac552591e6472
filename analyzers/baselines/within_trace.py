"""The within-trace estimate of a kernel's unslowed duration: the median duration of its signature's
instances that no communication kernel overlapped, in the same run; a signature that is always overlapped
falls back to the median of all its instances (so no slowdown can be claimed for it)."""

from __future__ import annotations

import polars as pl


def within_trace_baseline(kernels: pl.DataFrame) -> pl.DataFrame:
    """``run_id, signature → estimate_ns, clean_count, clean_mad_ns`` from a frame with ``comm_overlap_ns``."""
    clean = pl.col("comm_overlap_ns") == 0
    dur = pl.col("duration_ns")
    clean_dur = dur.filter(clean)
    return kernels.group_by("run_id", "signature").agg(
        clean_dur.median().fill_null(dur.median()).alias("estimate_ns"),
        clean.sum().alias("clean_count"),
        (clean_dur - clean_dur.median()).abs().median().fill_null(0.0).alias("clean_mad_ns"),
    )
