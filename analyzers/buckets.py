"""DDP's gradient buckets on the wire: each bucket's all-reduce time from a trace, and a latency-bandwidth
model of the all-reduce fitted to them.

DDP reduces its buckets in a fixed order, one all-reduce each, the same in every step: the k-th
``AllReduce`` of a normal step is bucket k. Its time is the kernel's duration on the rank that came to it
last (``traceql.analyzers.stragglers``): that rank waited for nobody, so its kernel lasted the transfer alone; the
other ranks' kernels also hold their wait.
"""

from __future__ import annotations

import numpy as np
import polars as pl

MB = 1 << 20


def bucket_times(arrivals: pl.DataFrame) -> pl.DataFrame:
    """Per all-reduce index k of a step (``bucket``): the median over steps of its time on the last rank to
    come (``allreduce_ns``) and in how many steps it was seen (``steps``)."""
    last = (arrivals.filter(pl.col("last") & pl.col("collective").str.starts_with("AllReduce"))  # any algorithm
            .sort("run_id", "step", "arrival_ns")
            .with_columns(pl.int_range(pl.len(), dtype=pl.Int64).over("run_id", "step").alias("bucket")))
    return (last.group_by("bucket")
            .agg(pl.col("duration_ns").median().alias("allreduce_ns"), pl.col("step").n_unique().alias("steps"))
            .sort("bucket"))


def comm_model(sizes_bytes: list[int], times_ms: list[float]) -> dict[str, float | int] | None:
    """``{"latency_ms", "ms_per_mb", "samples"}``: the least-squares line time = latency + size × ms_per_mb
    through the (size, time) pairs; None with fewer than two distinct sizes."""
    x = np.asarray(sizes_bytes, float) / MB
    y = np.asarray(times_ms, float)
    if len(np.unique(x)) < 2:
        return None
    slope, intercept = np.polyfit(x, y, 1)
    return {"latency_ms": round(float(intercept), 4), "ms_per_mb": round(float(slope), 5), "samples": int(len(x))}
