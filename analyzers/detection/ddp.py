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
    copy? Launch order is the API calls' (the GPU start where no call was recorded). Works on integer ids
    (run, kernel name without its shape), so that millions of kernels cost a few narrow columns."""
    keys = kernels.select(pl.col("key").unique().drop_nulls())
    names = keys.with_columns(pl.col("key").cast(pl.String).str.replace(SHAPE, "").rank("dense").cast(pl.Int64)
                              .alias("_name"))
    rows = kernels.select(
        pl.col("run_id").rank("dense").alias("_run"), "rank", "key", (pl.col("kind") == "comm").alias("_comm"),
        (pl.col("kind") == "compute").alias("_compute"), pl.coalesce("launch_ns", "start_ns").alias("_at"),
        "start_ns",
    ).join(names, on="key", how="left", maintain_order="left").drop("key")
    ordered = rows.sort("_run", "rank", "_at", "start_ns", maintain_order=True)
    same_rank = (pl.col("_run") == pl.col("_run").shift(1)) & (pl.col("rank") == pl.col("rank").shift(1))
    feeds = (pl.col("_comm") & pl.col("_compute").shift(1) & same_rank).fill_null(False)
    copies = (ordered.with_columns(pl.col("_name").shift(1).alias("_before"), feeds.alias("_feeds"))
              .filter("_feeds").select("_run", pl.col("_before").alias("_name")).unique()
              .with_columns(pl.lit(True).alias("_copy")))
    marked = rows.select("_run", "_name", "_compute").join(copies, on=["_run", "_name"], how="left",
                                                             maintain_order="left")
    return (marked["_copy"].fill_null(False) & marked["_compute"]).alias("ddp_copy")
