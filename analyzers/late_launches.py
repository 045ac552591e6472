"""Where a launch-bound run's GPUs waited: the CPU sections (annotation ranges) that issued the late launches.

A rank's GPU *waits for a launch* where it sits idle within a step (every earlier activity of the step done)
and the activity that ends the idle time was launched after it began: the GPU had nothing queued, and its CPU
was busy elsewhere. Each such gap, the whole of it, goes to the CPU section the late launch was issued in: the
innermost annotation range (NVTX, or a Kineto ``user_annotation``) that holds the launch call's start on that
rank, or ``None`` where none does. `traceql collect` puts each window step's ``forward``, ``backward`` and
``optimizer`` in ranges of those names; libraries add their own (NCCL's ``ncclAllReduce``, DDP's
``DistributedDataParallel.forward`` under torch.profiler).

:func:`by_section` sums them a run at a time: what ``causes`` splits the idle cause's cost by.
"""

from __future__ import annotations

import numpy as np
import polars as pl

LATE: dict[str, pl.DataType | type[pl.DataType]] = {
    "run_id": pl.String, "rank": pl.Int32, "step": pl.Int32, "section": pl.String, "wait_ns": pl.Int64}
SECTIONS: dict[str, pl.DataType | type[pl.DataType]] = {
    "run_id": pl.String, "section": pl.String, "wait_ns": pl.Int64, "share": pl.Float64}


def waits(ops: pl.DataFrame, ranges: pl.DataFrame) -> pl.DataFrame:
    """Per run, rank, normal step and section (:data:`LATE`), the time its GPU waited for launches issued in
    that section. ``ops``: GPU activities (``run_id``, ``rank``, ``step``, ``step_kind``, ``start_ns``,
    ``end_ns``, ``launch_ns``, one rank's times on one clock); ``ranges``: the CPU annotation ranges to name
    them by (``run_id``, ``rank``, ``start_ns``, ``end_ns``, ``text``; step ranges left out by the caller)."""
    timed = (ops.filter((pl.col("step_kind") == "sync") & pl.col("launch_ns").is_not_null())
             .select("run_id", "rank", "step", "start_ns", "end_ns", "launch_ns"))
    if timed.is_empty():
        return pl.DataFrame(schema=LATE)
    order, free = reach(step_groups(timed), timed["start_ns"].to_numpy(), timed["end_ns"].to_numpy())
    timed = timed[order].with_columns(pl.Series("_free", free))
    late = timed.filter((pl.col("start_ns") > pl.col("_free")) & (pl.col("launch_ns") > pl.col("_free")))
    if late.is_empty():
        return pl.DataFrame(schema=LATE)
    late = late.with_columns((pl.col("start_ns") - pl.col("_free")).alias("wait_ns"))
    parts = []
    for (run_id, rank), mine in late.group_by("run_id", "rank", maintain_order=True):
        own = ranges.filter((pl.col("run_id") == run_id) & (pl.col("rank") == rank))
        parts.append(mine.with_columns(pl.Series("section", innermost(own, mine["launch_ns"].to_numpy()),
                                                 dtype=pl.String)))
    out = pl.concat(parts).group_by("run_id", "rank", "step", "section").agg(pl.col("wait_ns").sum())
    return out.select(list(LATE)).cast(LATE).sort("run_id", "rank", "step", "section", nulls_last=True)  # type: ignore[arg-type]


def step_groups(ops: pl.DataFrame) -> np.ndarray:
    """Per activity of ``ops`` (``run_id``, ``rank``, ``step``), a number of its rank's step."""
    runs = ops["run_id"]
    run = (np.zeros(len(runs), np.int64) if runs.n_unique() == 1
           else runs.cast(pl.Categorical).to_physical().to_numpy().astype(np.int64))
    rank = ops["rank"].to_numpy().astype(np.int64)
    step = ops["step"].fill_null(-1).to_numpy().astype(np.int64)
    width = int(step.max()) + 2
    return (run * (int(rank.max()) + 1) + rank) * width + step + 1


def reach(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The activities in order of ``group`` and start, and for each (in that order) the latest end of the
    activities before it in its group: when its GPU was free of them; the first of a group's gets its own
    start (no gap before it)."""
    low = int(min(start.min(), end.min()))
    span = int(max(start.max(), end.max())) - low + 1
    nth = group.astype(np.int64) - int(group.min())  # each group's times lifted above those of the ones before
    if int(nth.max()) * span >= 2**62:  # too many groups apart for the times to be lifted so: closed up
        nth = np.unique(nth, return_inverse=True)[1].astype(np.int64).ravel()
    order = np.argsort((start - low) + nth * span, kind="stable")  # mostly in order already: a merge's work
    s, e, nth = start[order], end[order], nth[order]
    first = np.r_[True, nth[1:] != nth[:-1]]
    lifted = np.maximum.accumulate((e - low) + nth * span)
    free = np.empty_like(s)
    free[1:] = lifted[:-1] - nth[1:] * span + low
    free[first] = s[first]
    return order, free


def innermost(ranges: pl.DataFrame, at: np.ndarray) -> list[str | None]:
    """The text of the innermost of ``ranges`` (``start_ns``, ``end_ns``, ``text``; one thread's nesting, or
    ranges of several that nest in time) that holds each time of ``at``: the latest begun of those still
    open; None where none is."""
    if ranges.is_empty() or not len(at):
        return [None] * len(at)
    ranges = ranges.sort("start_ns", pl.col("end_ns"), descending=[False, True])
    starts, ends = ranges["start_ns"].to_numpy(), ranges["end_ns"].to_numpy()
    texts = ranges["text"].to_list()
    # the elementary pieces between every boundary, each with the innermost range open over it
    edges = np.unique(np.r_[starts, ends])
    owner = np.full(len(edges), -1, np.int64)
    open_: list[int] = []  # the ranges begun, in order; a closed one under the top leaves when it surfaces
    i = 0
    for k, t in enumerate(edges):
        while i < len(starts) and starts[i] <= t:
            open_.append(i)
            i += 1
        while open_ and ends[open_[-1]] <= t:
            open_.pop()
        if open_:
            owner[k] = open_[-1]
    piece = np.searchsorted(edges, at, side="right") - 1
    held = np.where(piece >= 0, owner[np.maximum(piece, 0)], -1)
    return [texts[h] if h >= 0 else None for h in held]


def by_section(late: pl.DataFrame, judged: pl.DataFrame) -> pl.DataFrame:
    """Per run and section (:data:`SECTIONS`), the time a rank's GPU waited for its launches a step (the mean
    over the run's ranks of their sums over the ``judged`` steps: ``run_id``, ``step``) and its share of the
    run's waiting, largest first."""
    mine = late.join(judged.select("run_id", pl.col("step").cast(pl.Int32)).unique(), on=["run_id", "step"])
    if mine.is_empty():
        return pl.DataFrame(schema=SECTIONS)
    steps = judged.group_by("run_id").agg(pl.col("step").n_unique().alias("_n"))
    ranks = mine.group_by("run_id").agg(pl.col("rank").n_unique().alias("_r"))
    out = (mine.group_by("run_id", "section").agg(pl.col("wait_ns").sum())
           .join(steps, on="run_id").join(ranks, on="run_id")
           .with_columns((pl.col("wait_ns") / (pl.col("_n") * pl.col("_r"))).round().cast(pl.Int64))
           .with_columns((pl.col("wait_ns") / pl.col("wait_ns").sum().over("run_id")).alias("share")))
    return out.select(list(SECTIONS)).sort("run_id", "wait_ns", descending=[False, True], maintain_order=True)
