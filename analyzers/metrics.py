"""Join Nsight Compute launch metrics to the kernels of a trace of the same workload.

A profiled launch matches the trace kernel with the same signature (short name, grid and block) that comes
at the same position among the launches of that signature (``launch_index``), on the first rank of each
run. Both frames carry ``signature`` (the caller keys them). Every
compute kernel then gets the ``ncu_*`` metrics: of its own launch when it was profiled
(``ncu_match = launch``), else the median over the profiled launches of its signature
(``ncu_match = signature``), else nulls (``ncu_match = none``).
"""

from __future__ import annotations

import polars as pl

KEY = ["signature"]


def curated_columns(metrics: pl.DataFrame) -> list[str]:
    return [c for c in metrics.columns if c.startswith("ncu_") and c != "ncu_id"]


def join_metrics(kernels: pl.DataFrame, metrics: pl.DataFrame) -> tuple[pl.DataFrame, float]:
    """``kernels`` (compute, with ``signature``) plus ``ncu_*`` columns and ``ncu_match``; and the match
    rate: the share of profiled launches that found their kernel in the trace."""
    cols = curated_columns(metrics)
    # the same launch may come twice (an ncu raw page and a details page of one profile)
    metrics = metrics.unique(subset=[*KEY, "launch_index"], keep="first", maintain_order=True).with_columns(
        pl.col(KEY).cast(kernels.schema["signature"]))  # joined with the kernels': String or Categorical
    ranked = kernels.with_row_index("_kernel_row").with_columns(
        pl.int_range(pl.len()).sort_by("start_ns").over(["run_id", "rank", *KEY]).alias("launch_index"),
        (pl.col("rank") == pl.col("rank").min().over("run_id")).alias("_first_rank"),
    )
    launch = (
        ranked.filter("_first_rank")
        .join(metrics.select([*KEY, "launch_index", *cols]), on=[*KEY, "launch_index"], how="inner")
        .select("_kernel_row", *cols)
    )
    runs = max(kernels["run_id"].n_unique(), 1)
    rate = min(launch.height / (metrics.height * runs), 1.0) if metrics.height else 0.0
    by_signature = metrics.group_by(KEY).agg(pl.col(c).median() for c in cols)
    signature = ranked.join(by_signature, on=KEY, how="inner").select("_kernel_row", *cols)
    sig_only = signature.join(launch.select("_kernel_row"), on="_kernel_row", how="anti")
    matched = pl.concat([launch.with_columns(pl.lit("launch").alias("ncu_match")),
                         sig_only.with_columns(pl.lit("signature").alias("ncu_match"))])
    out = ranked.join(matched, on="_kernel_row", how="left", maintain_order="left")
    out = out.with_columns(pl.col("ncu_match").fill_null("none"))
    return out.sort("_kernel_row").drop("_kernel_row", "launch_index", "_first_rank"), rate
