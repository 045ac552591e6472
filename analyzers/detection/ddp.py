"""DDP's own kernels, found in the trace alone: the gradient copies into buckets.

DDP's reducer copies each gradient into its bucket scaled by 1 / world size (on NVIDIA GPUs an elementwise
multiply, ``AUnaryFunctor<…MulFunctor…>``), and launches a bucket's all-reduce right after its last copy.
So the compute kernel launched just before each communication kernel, on the same rank, names the copy
kernel; every kernel of that name (whatever its grid: one per parameter size) is DDP's. Such kernels have no
counterpart in a run without DDP, so no reference can say whether communication slowed them.
"""

from __future__ import annotations

import polars as pl

SHAPE = r" g[0-9x]+ b[0-9x]+$"  # the grid and block that end a kernel key


def bucket_copies(kernels: pl.DataFrame) -> pl.Series:
    """For each row of ``kernels`` (all kinds, with ``key``, ``kind`` and ``launch_ns``): is it a DDP bucket
    copy? Launch order is the API calls' (the GPU start where no call was recorded)."""
    keys = kernels.select(pl.col("key").unique())
    names = keys.with_columns(pl.col("key").cast(pl.String).str.replace(SHAPE, "").alias("_name"))
    rows = kernels.select("run_id", "rank", "kind", "key", "launch_ns", "start_ns").join(
        names, on="key", how="left", maintain_order="left")
    ordered = rows.sort("run_id", "rank", pl.coalesce("launch_ns", "start_ns"), "start_ns", maintain_order=True)
    before = ordered.with_columns(
        pl.col("_name").shift(1).over("run_id", "rank").alias("_before"),
        pl.col("kind").shift(1).over("run_id", "rank").alias("_before_kind"))
    feeders = before.filter((pl.col("kind") == "comm") & (pl.col("_before_kind") == "compute"))
    copies = feeders.select("run_id", pl.col("_before").alias("_name")).unique()
    marked = rows.select("run_id", "_name", "kind").join(
        copies.with_columns(pl.lit(True).alias("_copy")), on=["run_id", "_name"], how="left", maintain_order="left")
    return ((marked["_copy"].fill_null(False)) & (marked["kind"] == "compute")).alias("ddp_copy")
