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


def _rows(kernels: pl.DataFrame) -> pl.DataFrame:
    """Each kernel's run, rank, kind flags, launch time and name without its shape (found once per key)."""
    keys = kernels.select(pl.col("key").unique().drop_nulls())
    names = keys.with_columns(pl.col("key").cast(pl.String).str.replace(SHAPE, "").alias("_name"))
    return kernels.select(
        "run_id", "rank", "key", (pl.col("kind") == "comm").alias("_comm"),
        (pl.col("kind") == "compute").alias("_compute"), pl.coalesce("launch_ns", "start_ns").alias("_at"),
        "start_ns",
    ).join(names, on="key", how="left", maintain_order="left").drop("key")


def _ordered(kernels: pl.DataFrame) -> pl.DataFrame:
    """:func:`_rows` in launch order, each rank's together."""
    return _rows(kernels).sort("run_id", "rank", "_at", "start_ns", maintain_order=True)


def copy_names(kernels: pl.DataFrame) -> pl.DataFrame:
    """``run_id, name``: the kernel names (without shape) that DDP's copies run under, in each run: those of the
    compute kernels launched right before a communication kernel of the same rank. The names of a run's
    ranks read apart, put together, are the run's."""
    return _names(_ordered(kernels))


def _names(ordered: pl.DataFrame) -> pl.DataFrame:
    same_rank = (pl.col("run_id") == pl.col("run_id").shift(1)) & (pl.col("rank") == pl.col("rank").shift(1))
    feeds = (pl.col("_comm") & pl.col("_compute").shift(1) & same_rank).fill_null(False)
    return (ordered.with_columns(pl.col("_name").shift(1).alias("_before"), feeds.alias("_feeds"))
            .filter("_feeds").select("run_id", pl.col("_before").alias("name")).unique(maintain_order=True))


def copy_edges(kernels: pl.DataFrame) -> pl.DataFrame:
    """``run_id, rank, first_comm, last_name``: whether a part of a rank (a window of its launches) begins with a
    communication kernel, and the name of the compute kernel it ends with (null: it ends with another kind).
    A part's last compute kernel feeds the next part's first communication kernel: :func:`edge_names`."""
    return _edges(_ordered(kernels))


def _edges(ordered: pl.DataFrame) -> pl.DataFrame:
    return ordered.group_by("run_id", "rank", maintain_order=True).agg(
        pl.col("_comm").first().alias("first_comm"),
        pl.when(pl.col("_compute").last()).then(pl.col("_name").last()).alias("last_name"))


def copy_parts(kernels: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """:func:`copy_names` and :func:`copy_edges` of the same kernels, put in launch order once."""
    ordered = _ordered(kernels)
    return _names(ordered), _edges(ordered)


def edge_names(edges: pl.DataFrame) -> pl.DataFrame:
    """``run_id, name``: the copy names found where one part of a rank meets the next (``edges``: each part's
    :func:`copy_edges`, parts in launch order)."""
    same = (pl.col("run_id") == pl.col("run_id").shift(1)) & (pl.col("rank") == pl.col("rank").shift(1))
    return edges.with_columns(pl.col("last_name").shift(1).alias("_before"), same.alias("_same")).filter(
        pl.col("first_comm") & pl.col("_same").fill_null(False) & pl.col("_before").is_not_null()).select(
        "run_id", pl.col("_before").alias("name"))


def mark_copies(kernels: pl.DataFrame, names: pl.DataFrame) -> pl.Series:
    """For each row of ``kernels``: is it a compute kernel under one of its run's DDP copy ``names``?"""
    copies = names.select("run_id", pl.col("name").alias("_name"), pl.lit(True).alias("_copy")).unique()
    marked = _rows(kernels).select("run_id", "_name", "_compute").join(copies, on=["run_id", "_name"], how="left",
                                                                        maintain_order="left")
    return (marked["_copy"].fill_null(False) & marked["_compute"]).alias("ddp_copy")


def bucket_copies(kernels: pl.DataFrame) -> pl.Series:
    """For each row of ``kernels`` (all kinds, with ``key``, ``kind`` and ``launch_ns``): is it a DDP bucket
    copy? Launch order is the API calls' (the GPU start where no call was recorded)."""
    return mark_copies(kernels, copy_names(kernels))
