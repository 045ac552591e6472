"""Within-trace estimates of a kernel's unslowed duration, from the trace alone (no isolated reference).

Only replicas lend each other a reference (``replicas``): each group of alike ranks of a run has its steps
aligned with its own canonical step (``twins``: the same alignment, the trace as its own reference), so each
kernel has a *position*, the same kernel at the same place of every step and replica.

- ``position_clean_ns``: median duration of the position's instances that no communication overlapped;
- ``position_min_ns``, ``position_min_frac``: the position's shortest instance, and its least overlap fraction;
- ``key_clean_ns``: median duration of the key's unoverlapped instances anywhere in the replicas' steps;
- ``corrected_ns``: where every instance of a position was overlapped, the intercept of its duration against
  its overlap (``correction``).

``estimate_ns`` takes the first that holds, and ``reference_kind`` says how good it is:

=================  ================================================================  ================
estimate_source    what                                                              reference_kind
=================  ================================================================  ================
position           the position's clean median                                       clean
position-min       its shortest instance, overlapped under a tenth                   contaminated
key                the key's clean median elsewhere in the step                      borrowed
corrected          the intercept of duration against overlap                         corrected
position-min       its shortest instance (an upper bound of the unslowed duration)   contaminated
none               nothing: no steps, and no unoverlapped instance of the key        none
=================  ================================================================  ================
"""

from __future__ import annotations

import numpy as np
import polars as pl

from traceql.analyzers.baselines.correction import corrected_positions
from traceql.analyzers.baselines.kinds import BORROWED, CLEAN, CONTAMINATED, CORRECTED, NONE
from traceql.analyzers.baselines.replicas import replica_groups
from traceql.analyzers.baselines.twins import twin_baselines

NEARLY_CLEAN = 0.1  # a position's shortest instance overlapped less than this is a fair reference
PART = ["run_id", "replica"]  # the ranks that lend each other a reference
KINDS = {"position": CLEAN, "position-min": CONTAMINATED, "key": BORROWED, "corrected": CORRECTED, "none": NONE}


def self_positions(kernels: pl.DataFrame) -> pl.Series:
    """``position``, for each row of ``kernels`` (with ``replica``): its place in its replicas' canonical
    step (null outside the steps)."""
    none = pl.repeat(None, kernels.height, dtype=pl.Int64, eager=True).alias("position")
    if kernels["step"].is_null().all():
        return none
    aligned = twin_baselines(kernels, kernels, by=PART)
    order = kernels["_row"].arg_sort().to_numpy()  # row ids are unique: each aligned row is found by search
    at = order[np.searchsorted(kernels["_row"].to_numpy()[order], aligned["_row"].to_numpy())]
    return none.scatter(at, aligned["twin_pos"])


def within_trace_estimates(kernels: pl.DataFrame) -> pl.DataFrame:
    """``kernels`` (compute, with ``_row``, ``key``, steps and ``comm_overlap_ns``/``_frac``) plus the
    estimates above, ``estimate_ns``, ``estimate_source`` and ``reference_kind``."""
    clean = pl.col("comm_overlap_ns") == 0
    dur = pl.col("duration_ns").cast(pl.Float64)
    replicas = kernels.select("run_id", "rank").join(replica_groups(kernels), on=["run_id", "rank"], how="left",
                                                     maintain_order="left")["replica"]
    slim = kernels.select("_row", "run_id", "rank", "step", "step_kind", "key", "launch_ns", "start_ns",
                          "duration_ns").with_columns(replicas)
    narrow = kernels.select("run_id", "key", "duration_ns", "comm_overlap_ns", "comm_overlap_frac").with_columns(
        replicas, self_positions(slim))  # the windows run on these columns alone: the wide frame is never copied
    pos = [*PART, "position"]
    stepped = pl.col("position").is_not_null()
    stats = narrow.with_columns(
        pl.when(stepped).then(dur.filter(clean).median().over(pos)).alias("position_clean_ns"),
        pl.when(stepped).then(dur.min().over(pos)).alias("position_min_ns"),
        pl.when(stepped).then(pl.col("comm_overlap_frac").min().over(pos)).alias("position_min_frac"),
        dur.filter(clean).median().over(*PART, "key").alias("key_clean_ns"),
    )
    stats = stats.join(corrected_positions(stats), on=pos, how="left", maintain_order="left")
    out = kernels.with_columns(stats.select("replica", "position", "position_clean_ns", "position_min_ns",
                                            "position_min_frac", "key_clean_ns", "corrected_ns"))
    choices = [("position", pl.col("position_clean_ns")),
               ("position-min", pl.when(pl.col("position_min_frac") < NEARLY_CLEAN).then(pl.col("position_min_ns"))),
               ("key", pl.col("key_clean_ns")),
               ("corrected", pl.col("corrected_ns")),
               ("position-min", pl.col("position_min_ns"))]
    source = pl.lit("none")
    for name, value in reversed(choices):
        source = pl.when(value.is_not_null()).then(pl.lit(name)).otherwise(source)
    return out.with_columns(pl.coalesce(*(v for _, v in choices)).alias("estimate_ns"),
                            source.alias("estimate_source")).with_columns(
        pl.col("estimate_source").replace_strict(KINDS, return_dtype=pl.String).alias("reference_kind"))
