"""Within-trace estimates of a kernel's unslowed duration, from the trace alone (no isolated reference).

The trace's own steps are aligned with its canonical step (``twins``: the same alignment, the trace as its
own reference); each kernel then has a *position*, the same kernel at the same place of every step and rank.

- ``position_clean_ns``: median duration of the position's instances that no communication overlapped;
- ``position_min_ns``, ``position_min_frac``: the position's shortest instance, and its least overlap fraction;
- ``key_clean_ns``: median duration of the key's unoverlapped instances anywhere in the run.

``estimate_ns`` takes the first that holds: the position's clean median; the position's minimum when some
instance there was overlapped less than half; the key's clean median; the position's minimum. A kernel with
none (no steps, and no unoverlapped instance of its key) has no estimate: ``estimate_source`` none.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from traceql.analyzers.baselines.twins import twin_baselines

MOSTLY_CLEAN = 0.5  # a position instance overlapped less than this is a fair reference


def self_positions(kernels: pl.DataFrame) -> pl.Series:
    """``position``, for each row of ``kernels``: its place in the trace's canonical step (null outside the
    steps)."""
    none = pl.repeat(None, kernels.height, dtype=pl.Int64, eager=True).alias("position")
    if kernels["step"].is_null().all():
        return none
    aligned = twin_baselines(kernels, kernels)
    order = kernels["_row"].arg_sort().to_numpy()  # row ids are unique: each aligned row is found by search
    at = order[np.searchsorted(kernels["_row"].to_numpy()[order], aligned["_row"].to_numpy())]
    return none.scatter(at, aligned["twin_pos"])


def within_trace_estimates(kernels: pl.DataFrame) -> pl.DataFrame:
    """``kernels`` (compute, with ``_row``, ``key``, steps and ``comm_overlap_ns``/``_frac``) plus the
    estimates above, ``estimate_ns`` and ``estimate_source`` (position, position-min, key, none)."""
    clean = pl.col("comm_overlap_ns") == 0
    dur = pl.col("duration_ns").cast(pl.Float64)
    pos = ["run_id", "position"]
    narrow = kernels.select("run_id", "key", "duration_ns", "comm_overlap_ns", "comm_overlap_frac").with_columns(
        self_positions(kernels))  # the windows run on these columns alone: the wide frame is never copied
    stats = narrow.select(
        "position",
        pl.when(pl.col("position").is_not_null()).then(dur.filter(clean).median().over(pos))
        .alias("position_clean_ns"),
        pl.when(pl.col("position").is_not_null()).then(dur.min().over(pos)).alias("position_min_ns"),
        pl.when(pl.col("position").is_not_null()).then(pl.col("comm_overlap_frac").min().over(pos))
        .alias("position_min_frac"),
        dur.filter(clean).median().over("run_id", "key").alias("key_clean_ns"),
    )
    out = kernels.with_columns(stats)
    mostly_clean = pl.col("position_min_frac") < MOSTLY_CLEAN
    choices = [("position", pl.col("position_clean_ns")),
               ("position-min", pl.when(mostly_clean).then(pl.col("position_min_ns"))),
               ("key", pl.col("key_clean_ns")),
               ("position-min", pl.col("position_min_ns"))]
    source = pl.lit("none")
    for name, value in reversed(choices):
        source = pl.when(value.is_not_null()).then(pl.lit(name)).otherwise(source)
    return out.with_columns(pl.coalesce(*(v for _, v in choices)).alias("estimate_ns"), source.alias("estimate_source"))
