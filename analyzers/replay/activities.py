"""What a replay is made of: every GPU activity of a timeline with its rank's clock offset, marked with the
slowdown cases `detect` labelled, and put on its run's common clock."""

from __future__ import annotations

import polars as pl

from traceql.analyzers.replay.graph import OP_COLUMNS
from traceql.analyzers.replay.stored import Frame
from traceql.analyzers.replay.windows import with_cases

KEY = ["run_id", "rank", "device", "stream", "start_ns", "end_ns"]  # a kernel in a trace and in its labels


def activities(kernels: pl.DataFrame, memops: pl.DataFrame, ranks: pl.DataFrame) -> pl.DataFrame:
    """Every GPU activity of a timeline (``graph.OP_COLUMNS``), with its rank's ``clock_offset_ns`` (the times
    are as the trace has them: :func:`on_clock` puts them on the run's common clock)."""
    kernels = kernels.filter(pl.col("kind").is_in(["compute", "comm"])).with_columns(
        pl.col("collective").fill_null(pl.col("short_name").cast(pl.String)), pl.col("name").cast(pl.Categorical))
    memops = memops.with_columns(pl.lit(None, pl.String).alias("collective"),
                                 pl.col("kind").cast(pl.Categorical).alias("name"))
    # each activity's name, carried through the replay (``_name``): what a straggler's extra work is told by
    both = pl.concat([kernels.select(*OP_COLUMNS, pl.col("name").alias("_name")),
                      memops.select(*OP_COLUMNS, pl.col("name").alias("_name"))], how="vertical_relaxed")
    return both.join(ranks.select("run_id", "rank", "clock_offset_ns"), on=["run_id", "rank"], how="left")


def with_labels(ops: Frame, rows: pl.DataFrame) -> Frame:
    """``ops`` (:func:`activities`; lazy, they stay lazy) with whether each is a slowdown case (``_case``) and its
    baseline (``_base``), from `detect`'s rows (those of the cases suffice)."""
    return with_cases(ops, rows.filter(pl.col("is_slowdown")).select(*KEY, pl.lit(True).alias("_case"),
                                                                     pl.col("baseline_ns").alias("_base")))


def on_clock(ops: Frame) -> Frame:
    """``ops`` (activities, or `detect`'s rows of them) on their run's common clock: each rank's
    ``clock_offset_ns`` added to the times they have (start, end, launch)."""
    shift = pl.col("clock_offset_ns").fill_null(0)
    names = ops.collect_schema().names() if isinstance(ops, pl.LazyFrame) else ops.columns
    times = [c for c in ("start_ns", "end_ns", "launch_ns") if c in names]
    return ops.with_columns(pl.col(c) + shift for c in times).drop("clock_offset_ns")
