"""Holistic Trace Analysis (HTA 0.5.0) conventions, to reproduce its numbers exactly when asked.

HTA differs from traceql's exact model in three ways:
1. Window: with two or more ``ProfilerStep#N`` annotations, it keeps only GPU activity whose CUDA launch
   call is in the trace and started before the latest-starting ProfilerStep annotation (CPU or GPU side).
2. Time: timestamps are parsed as float64 microseconds (about 0.25 µs apart at today's epoch values) and
   each event is shrunk inward to whole microseconds (start rounded up, end rounded down).
3. Kinds: a kernel whose name contains ``Sync`` or ``Memcpy``, or starts with ``Memset``, is not compute.
"""

from __future__ import annotations

import polars as pl

RANK_KEY = ["run_id", "rank"]
US = 1000


def _float_us(ns: pl.Expr) -> pl.Expr:
    """The float64 a JSON parser makes of the µs text of ``ns`` (whole µs exact, then the decimals added)."""
    return (ns // US).cast(pl.Float64) + (ns % US).cast(pl.Float64) / US


def _ceil_us(ns: pl.Expr) -> pl.Expr:
    return _float_us(ns).ceil().cast(pl.Int64) * US


def _window(frame: pl.DataFrame, last_step: pl.DataFrame) -> pl.DataFrame:
    joined = frame.join(last_step, on=RANK_KEY, how="left", maintain_order="left")
    keep = pl.col("last_step_ns").is_null() | (
        pl.col("launch_ns").is_not_null() & (_ceil_us(pl.col("launch_ns")) < pl.col("last_step_ns"))
    )
    return joined.filter(keep).drop("last_step_ns")


def _round(frame: pl.DataFrame) -> pl.DataFrame:
    end_us = _float_us(pl.col("start_ns")) + pl.col("duration_ns").cast(pl.Float64) / US
    return frame.with_columns(
        _ceil_us(pl.col("start_ns")).alias("start_ns"), (end_us.floor().cast(pl.Int64) * US).alias("end_ns")
    ).with_columns((pl.col("end_ns") - pl.col("start_ns")).alias("duration_ns"))


def hta_view(
    kernels: pl.DataFrame, memops: pl.DataFrame, nvtx: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Kernels and memory operations as HTA 0.5.0 sees them (window, µs rounding, kinds)."""
    steps = nvtx.filter(pl.col("text").str.starts_with("ProfilerStep"))
    if steps["text"].n_unique() >= 2:
        last_step = steps.group_by(RANK_KEY).agg(_ceil_us(pl.col("start_ns")).max().alias("last_step_ns"))
        kernels, memops = _window(kernels, last_step), _window(memops, last_step)
    kernels = kernels.with_columns(
        pl.when((pl.col("kind") == "compute") & pl.col("name").cast(pl.String).str.contains(r"Sync|Memcpy|^Memset"))
        .then(pl.lit("other")).otherwise(pl.col("kind")).alias("kind")
    )
    return _round(kernels), _round(memops)
