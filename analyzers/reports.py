"""The data of the report: a step's timeline per rank, the slowdown ratios by collective, time lost per step."""

from __future__ import annotations

import polars as pl

from traceql.analyzers.shown import RANKS_SHOWN

CATEGORIES = ("slowed", "compute", "communication", "memory")  # drawing order: slowed kernels on top


STEP = ["run_id", "rank", "step"]


def step_spans(kernels: pl.DataFrame, memops: pl.DataFrame) -> pl.DataFrame:
    """Per (run_id, rank, step) of the normal steps: its GPU time (first start to last end of what it
    launched)."""
    ends = [frame.filter(pl.col("step_kind") == "sync").group_by(STEP).agg(  # each frame on its own: not copied
        pl.col("start_ns").min(), pl.col("end_ns").max()) for frame in (kernels, memops)]
    return pl.concat(ends).group_by(STEP).agg((pl.col("end_ns").max() - pl.col("start_ns").min()).alias("gpu_ns"))


def step_cases(labelled: pl.DataFrame) -> pl.DataFrame:
    """Per (run_id, rank, step) of the normal steps: its cases and time lost."""
    lost = (pl.col("duration_ns") - pl.col("baseline_ns")).filter(pl.col("is_slowdown"))
    return labelled.filter(pl.col("step_kind") == "sync").group_by(STEP).agg(
        pl.col("is_slowdown").sum().cast(pl.Int64).alias("cases"),
        lost.sum().fill_null(0).round(0).cast(pl.Int64).alias("time_lost_ns"))


def step_totals(spans: pl.DataFrame, cases: pl.DataFrame) -> pl.DataFrame:
    """:func:`step_spans` with their :func:`step_cases` (0 where none), sorted."""
    return (spans.join(cases, on=STEP, how="left")
            .with_columns(pl.col("cases", "time_lost_ns").fill_null(0))
            .sort(STEP))


def step_cost(labelled: pl.DataFrame, kernels: pl.DataFrame, memops: pl.DataFrame) -> pl.DataFrame:
    """Per (run_id, rank, step) of the normal steps: its GPU time (first start to last end of what it
    launched), cases and time lost."""
    return step_totals(step_spans(kernels, memops), step_cases(labelled))


def busiest_step(cost: pl.DataFrame) -> int | None:
    """The normal step with the most time lost over all ranks (the earliest on a tie), the first captured one
    left out where there are others (each rank's capture began at its own moment: it is no normal step); None
    without steps."""
    if cost.is_empty():
        return None
    per_step = cost.group_by("step").agg(pl.col("time_lost_ns").sum()).sort(["time_lost_ns", "step"],
                                                                           descending=[True, False])
    later = per_step.filter(pl.col("step") != per_step["step"].min())
    return int((later if later.height else per_step)["step"][0])


def step_timeline(labelled: pl.DataFrame, kernels: pl.DataFrame, memops: pl.DataFrame, step: int,
                  offsets: pl.DataFrame | None = None, own_clocks: bool = False) -> pl.DataFrame:
    """Everything the normal step ``step`` launched, per rank, with times in ms from the step's first start on
    any rank of its run (on the run's common clock: ``offsets``, each rank's ``clock_offset_ns``), or with
    ``own_clocks`` (ranks whose clocks disagree) from the rank's own first start: ``run_id, rank, stream,
    start_ms, duration_ms, category, name, ratio, baseline_ns, collective``."""
    in_step = (pl.col("step") == step) & (pl.col("step_kind") == "sync")
    compute = labelled.filter(in_step).select(
        "run_id", "rank", "stream", "start_ns", "duration_ns",
        pl.when(pl.col("is_slowdown")).then(pl.lit("slowed")).otherwise(pl.lit("compute")).alias("category"),
        pl.col("short_name").alias("name"), pl.col("slowdown_ratio").alias("ratio"), "baseline_ns",
        pl.col("concurrent_comm").alias("collective"))
    comm = kernels.filter(in_step & (pl.col("kind") == "comm")).select(
        "run_id", "rank", "stream", "start_ns", "duration_ns", pl.lit("communication").alias("category"),
        pl.col("short_name").alias("name"), pl.lit(None, pl.Float64).alias("ratio"),
        pl.lit(None, pl.Float64).alias("baseline_ns"), pl.col("collective"))
    memory = memops.filter(in_step).select(
        "run_id", "rank", "stream", "start_ns", "duration_ns", pl.lit("memory").alias("category"),
        pl.col("copy_kind").alias("name"), pl.lit(None, pl.Float64).alias("ratio"),
        pl.lit(None, pl.Float64).alias("baseline_ns"), pl.lit(None, pl.String).alias("collective"))
    frame = pl.concat([compute, comm, memory], how="vertical_relaxed")
    if offsets is not None:
        frame = frame.join(offsets.select("run_id", "rank", "clock_offset_ns"), on=["run_id", "rank"], how="left"
                           ).with_columns(pl.col("start_ns") + pl.col("clock_offset_ns").fill_null(0)
                                          ).drop("clock_offset_ns")
    origin = pl.col("start_ns").min().over(["run_id", "rank"] if own_clocks else "run_id")
    return frame.with_columns(((pl.col("start_ns") - origin) / 1e6).alias("start_ms"),
                              (pl.col("duration_ns") / 1e6).alias("duration_ms")).sort("run_id", "rank", "start_ns")


def ratio_distribution(labelled: pl.DataFrame) -> pl.DataFrame:
    """The slowdown ratio of every overlapped compute kernel with a baseline, and the collective it ran next to."""
    return labelled.filter((pl.col("comm_overlap_ns") > 0) & pl.col("slowdown_ratio").is_not_null()).select(
        "slowdown_ratio", pl.col("concurrent_comm").fill_null("comm"), "is_slowdown")


def longest(rows: pl.DataFrame, column: str, limit: int) -> pl.DataFrame:
    """Of one run's rows by step (one or several a step: ``step`` and ``column``), those of its ``limit`` steps
    of the largest ``column`` (a step's largest of its rows; the earlier step on a tie, a step without one
    last; all where it has no more)."""
    top = (rows.group_by("step").agg(pl.col(column).max())
           .sort([column, "step"], descending=[True, False], nulls_last=True).head(limit))
    return rows.filter(pl.col("step").is_in(top["step"].implode()))


def longest_steps(rows: pl.DataFrame, limit: int, every_rank: bool = False) -> tuple[pl.DataFrame, bool]:
    """Of one run's steps by rank (``run_id``, ``rank``, ``step``, ``gpu_ns``, ...): its ``limit`` steps with the
    longest GPU time on any rank (:func:`longest`), sorted by step and rank; of a run of more than
    ``shown.RANKS_SHOWN`` ranks, unless ``every_rank``, each step's slowest rank alone (the longest GPU time;
    the lowest rank on a tie). And whether it is each step's slowest rank alone."""
    rows = longest(rows, "gpu_ns", limit)
    slowest = not every_rank and rows["rank"].n_unique() > RANKS_SHOWN
    if slowest:
        rows = rows.sort(["step", "gpu_ns", "rank"], descending=[False, True, False], nulls_last=True
                         ).unique("step", keep="first", maintain_order=True)
    return rows.sort("step", "rank"), slowest
