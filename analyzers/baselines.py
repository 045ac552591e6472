"""Each compute kernel's unslowed duration: from an isolated run, or estimated within the trace.

- Isolated (paired) baseline: the median duration of the kernel's signature in a run of the same model
  and shapes without communication.
- Within-trace estimate: the median duration of the signature's instances that no communication kernel
  overlapped, in the same run; a signature that is always overlapped falls back to the median of all its
  instances (so no slowdown can be claimed for it).
"""

from __future__ import annotations

import polars as pl

from analyzers.overlap import with_signature


def isolated_baseline(isolated_kernels: pl.DataFrame) -> pl.DataFrame:
    """``signature → baseline_ns, baseline_count`` from the compute kernels of an isolated run."""
    compute = with_signature(isolated_kernels.filter(pl.col("kind") == "compute"))
    return compute.group_by("signature").agg(
        pl.col("duration_ns").median().alias("baseline_ns"), pl.len().alias("baseline_count")
    )


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


def match_rate(kernels: pl.DataFrame, baseline: pl.DataFrame) -> float:
    """Fraction of compute kernels whose signature the baseline has."""
    if kernels.is_empty():
        return 0.0
    have = kernels["signature"].is_in(baseline["signature"].implode())
    return float(have.mean())
