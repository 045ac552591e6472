"""The feature table of compute kernels that the slowdown detector reads, from the trace alone.

- ``log_ratio``: ln(duration / within-trace estimate) (``baselines.within_trace``), the estimate divided by its
  learned factor (``baselines.learned``) and raised to duration − overlap where it is below
  (``baselines.physical.floor``: a kernel loses at most what overlapped);
- ``log_key_ratio``: ln(duration / the key's unoverlapped median), 0 where the key never ran unoverlapped;
- ``log_min_ratio``: ln(duration / the shortest instance at its step position), 0 outside the steps;
- ``log_duration``: ln(duration);
- ``comm_overlap_frac``: the share of the kernel that communication overlapped;
- ``no_reference``: 1 when the trace holds nothing to compare it with: no estimate, or a kernel only DDP runs
  (``ddp.bucket_copies``) — then it is never a case;
- ``clean_reference``: 1 when the estimate is the median of the kernel's own unoverlapped instances at its place
  of the step (``reference_kind`` clean): its ratio alone decides.
"""

from __future__ import annotations

import polars as pl

from traceql.analyzers.baselines.kinds import CLEAN
from traceql.analyzers.baselines.learned import factor_of
from traceql.analyzers.baselines.physical import floor
from traceql.analyzers.baselines.within_trace import within_trace_estimates

INPUTS = ["_row", "run_id", "rank", "step", "step_kind", "key", "launch_ns", "start_ns", "duration_ns",
          "comm_overlap_ns", "comm_overlap_frac", "ddp_copy"]  # the columns of compute kernels it reads
FEATURES = ["log_ratio", "log_key_ratio", "log_min_ratio", "log_duration"]  # what the forest sees
COLUMNS = [*FEATURES, "comm_overlap_frac", "no_reference", "clean_reference"]  # what the detector reads


def features_of(estimates: pl.DataFrame, factors: pl.DataFrame | None = None) -> pl.DataFrame:
    """Add the detector's :data:`COLUMNS` to compute kernels that carry their estimates
    (``baselines.within_trace``) and ``ddp_copy``; ``factors``: the estimates' (``baselines.learned``; None:
    the shipped ones)."""
    dur = pl.col("duration_ns").cast(pl.Float64).clip(lower_bound=1.0)

    def log_ratio(col: str) -> pl.Expr:
        return (dur / pl.col(col).clip(lower_bound=1.0)).log()

    factor = factor_of(estimates, factors)
    return estimates.with_columns(floor(pl.col("estimate_ns") / factor).alias("estimate_ns")).with_columns(
        log_ratio("estimate_ns").alias("log_ratio"),
        log_ratio("key_clean_ns").fill_null(0.0).alias("log_key_ratio"),
        log_ratio("position_min_ns").fill_null(0.0).alias("log_min_ratio"),
        dur.log().alias("log_duration"),
        (pl.col("estimate_ns").is_null() | pl.col("ddp_copy")).cast(pl.Float64).alias("no_reference"),
        (pl.col("reference_kind") == CLEAN).cast(pl.Float64).alias("clean_reference"),
    )


def feature_table(overlap: pl.DataFrame, factors: pl.DataFrame | None = None) -> pl.DataFrame:
    """Add the estimates and the detector's :data:`COLUMNS` to compute kernels with ``_row``, ``key``, steps,
    ``comm_overlap_ns``/``_frac`` and ``ddp_copy``: the whole run at once (``factors``: :func:`features_of`)."""
    return features_of(within_trace_estimates(overlap), factors)
