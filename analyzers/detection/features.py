"""The feature table of compute kernels that the slowdown detector reads."""

from __future__ import annotations

import polars as pl

from analyzers.baselines.within_trace import within_trace_baseline

FEATURES = ["log_ratio", "log_duration", "robust_z", "comm_overlap_frac"]


def feature_table(overlap: pl.DataFrame) -> pl.DataFrame:
    """Add the detector's features to a frame of compute kernels with ``signature`` and ``comm_overlap_ns``.

    - ``estimate_ns``: the within-trace unslowed duration of the kernel's signature (see ``baselines``)
    - ``log_ratio``: ln(duration / estimate)
    - ``log_duration``: ln(duration)
    - ``robust_z``: (duration − estimate) / (the signature's unoverlapped MAD + 1 % of the estimate), in ±50
    - ``comm_overlap_frac``: the share of the kernel that communication overlapped
    """
    est = within_trace_baseline(overlap)
    dur = pl.col("duration_ns").cast(pl.Float64).clip(lower_bound=1.0)
    estimate = pl.col("estimate_ns").clip(lower_bound=1.0)
    return overlap.join(est, on=["run_id", "signature"], how="left", maintain_order="left").with_columns(
        (dur / estimate).log().alias("log_ratio"),
        dur.log().alias("log_duration"),
        ((dur - estimate) / (pl.col("clean_mad_ns") + 0.01 * estimate)).clip(-50.0, 50.0).alias("robust_z"),
    )
