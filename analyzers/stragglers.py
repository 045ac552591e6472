"""Stragglers: the rank the others waited for, step by step, from when each rank's collectives began.

A collective kernel (NCCL's ``AllReduce``, ``AllGather`` …) starts on a rank when that rank has launched it
and its GPU reached it; it ends on every rank together, once the last rank has arrived. So the *arrival* of a
rank at a collective is its kernel's start, on the run's common clock (per-rank exports are shifted by their
``clock_offset_ns``), and the *arrival skew* of the collective is the latest arrival minus the earliest.

Collectives are matched across ranks by step, collective and order: the k-th ``AllReduce`` of step ``i`` on
one rank is the k-th on every other (NCCL requires every rank to issue a communicator's collectives in the
same order). Only collectives found on every rank of the run count.

The rank that arrived last *held* the others: for as long as it came after every other rank (its arrival
minus the second latest), all of them waited. A rank is the *straggler* of a step when, summed over the
step's collectives, it held the others for at least ``min_share`` of the step's time and ``min_wait_ns``;
the *waiting ranks* are those that waited for it at least that long. The first captured step of each run is
not judged: a profiler starts capturing on each rank at its own moment, which delays that step's first
collective on the ranks that started last.

Holding is evidence, not cost: where collectives run on a stream of their own beside compute (FSDP's
all-gathers), the others may wait at many collectives while their compute goes on. A replay prices each
straggler (what its step takes without the rank's delays, ``traceql.analyzers.replay``); :func:`priced`
keeps those that cost their step at least ``MIN_COST_SHARE`` of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import polars as pl

MIN_SHARE = 0.10  # of the step's median GPU time
MIN_WAIT_NS = 1_000_000
MIN_COST_SHARE = 0.05  # of the step's replayed time: what a straggler must cost it to be named
# A collective ends on every rank together: when the ranks' ends lie further apart than this (the median over
# a run's collectives), their clocks do not agree, and arrivals cannot be compared (measured: 2-24 us)
MAX_END_SKEW_NS = 1_000_000

_STEP = ["run_id", "step"]
ARRIVALS = {"run_id": pl.String, "step": pl.Int32, "collective": pl.String, "index": pl.UInt32,
            "rank": pl.Int32, "arrival_ns": pl.Int64, "duration_ns": pl.Int64, "wait_ns": pl.Int64,
            "last": pl.Boolean, "held_ns": pl.Int64}


def arrivals(kernels: pl.DataFrame, ranks: pl.DataFrame, *, keep: Sequence[str] = (),
             whole: bool = False) -> pl.DataFrame:
    """One row per rank and collective of the normal steps: its arrival on the common clock, its kernel's
    duration, how long it waited for the last rank (``wait_ns``), whether it was the last and for how long it
    held the others (``held_ns``: 0 unless last). The last rank's duration is the collective's own time: it
    waited for nobody. ``keep``: more columns of ``kernels`` carried along, after those. ``whole``: also the
    collectives outside any step (step null, matched by their order over the capture) and those some rank of
    the run lacks (the others' rows, judged among themselves: one rank of a larger job)."""
    normal = pl.col("step_kind") == "sync"
    comm = (kernels.lazy().filter((pl.col("kind") == "comm") & (normal | pl.col("step_kind").is_null() if whole
                                                                 else normal))
            .join(ranks.lazy().select("run_id", "rank", "clock_offset_ns"), on=["run_id", "rank"], how="left")
            .select("run_id", "rank", "step", pl.col("collective").fill_null(pl.col("short_name")),
                    (pl.col("start_ns") + pl.col("clock_offset_ns").fill_null(0)).alias("arrival_ns"),
                    (pl.col("end_ns") - pl.col("start_ns")).alias("duration_ns"), *keep)
            .sort("run_id", "rank", "step", "arrival_ns")
            .with_columns(pl.int_range(pl.len(), dtype=pl.UInt32).over("run_id", "rank", "step", "collective")
                          .alias("index")))
    group = [*_STEP, "collective", "index"]
    n_ranks = ranks.lazy().group_by("run_id").agg(pl.col("rank").n_unique().alias("n_ranks"))
    latest, second = pl.col("arrival_ns").max(), pl.col("arrival_ns").sort(descending=True).get(1, null_on_oob=True)
    out = (comm.join(n_ranks, on="run_id")
           .filter(pl.lit(whole) | ((pl.len().over(group) == pl.col("n_ranks")) & (pl.col("n_ranks") > 1)))
           .with_columns((latest.over(group) - pl.col("arrival_ns")).alias("wait_ns"),
                         # of ranks arriving at the same nanosecond the highest is the last, on every reading
                         (pl.col("rank") == pl.col("rank").sort_by("arrival_ns", "rank").last().over(group))
                         .alias("last"),
                         (latest - second).over(group).alias("lead"))
           .with_columns(pl.when(pl.col("last")).then(pl.col("lead")).otherwise(0).fill_null(0).alias("held_ns"))
           .select(*ARRIVALS, *keep).sort(*group, "rank"))
    return out.collect().cast(cast("Mapping[Any, type[pl.DataType]]", ARRIVALS))


def end_skew(arrivals_: pl.DataFrame) -> pl.DataFrame:
    """Per run: the median over its collectives of how far apart their ends lie on the ranks
    (``end_skew_ns``); far above :data:`MAX_END_SKEW_NS`, the ranks' clocks disagree."""
    group = ["run_id", "step", "collective", "index"]
    end = pl.col("arrival_ns") + pl.col("duration_ns")
    return (arrivals_.group_by(group).agg((end.max() - end.min()).alias("spread"))
            .group_by("run_id").agg(pl.col("spread").median().alias("end_skew_ns")).sort("run_id"))


def disagreeing(arrivals_: pl.DataFrame) -> list[tuple[str, int]]:
    """``(run_id, end skew)`` of the runs whose ranks' clocks disagree, from their collectives' arrivals:
    what every command judges clocks by, so that all say the same."""
    return [(run, skew) for run, skew in end_skew(arrivals_).iter_rows() if skew > MAX_END_SKEW_NS]


def step_skew(arrivals_: pl.DataFrame) -> pl.DataFrame:
    """Per (run_id, step, rank): how long the rank held the others (``held_ns``), how long it waited
    (``wait_ns``) and how many collectives it was last at, over the step's collectives."""
    return (arrivals_.group_by(*_STEP, "rank")
            .agg(pl.col("held_ns").sum(), pl.col("wait_ns").sum(), pl.col("last").sum().alias("last_at"),
                 pl.len().alias("collectives"))
            .sort(*_STEP, "rank"))


def stragglers(arrivals_: pl.DataFrame, step_ns: pl.DataFrame, *, min_share: float = MIN_SHARE,
               min_wait_ns: int = MIN_WAIT_NS) -> pl.DataFrame:
    """The stragglers (module doc): one row per (run_id, step) that has one, with ``rank``, ``step`` and the
    evidence: ``held_ns`` (how long it held the others, summed over the step's collectives: the others'
    waiting, not what the straggler cost the step, which a replay tells: ``traceql.analyzers.replay``),
    ``waiting_ranks`` (sorted), ``held_share`` (held_ns over the step's time), ``last_at`` of the step's
    ``collectives``. ``step_ns``: per (run_id, step) the step's time (``step_ns``)."""
    skew = step_skew(arrivals_)
    first = skew.group_by("run_id").agg(pl.col("step").min().alias("first"))
    floor = pl.max_horizontal(pl.lit(min_wait_ns), (min_share * pl.col("step_ns")).cast(pl.Int64))
    named = (skew.join(first, on="run_id").filter(pl.col("step") != pl.col("first"))
             .join(step_ns, on=_STEP).filter(pl.col("held_ns") >= floor)
             .sort(*_STEP, "held_ns", "rank", descending=[False] * len(_STEP) + [True, False])
             .unique(_STEP, keep="first", maintain_order=True)  # ranks late by turns: the one that held longest
             .select(*_STEP, "rank", pl.col("held_ns").alias("wait_ns"), "step_ns", "last_at", "collectives"))
    waited = (skew.join(named.select(*_STEP, pl.col("rank").alias("straggler"), pl.col("wait_ns").alias("held")),
                        on=_STEP)
              .filter(pl.col("rank") != pl.col("straggler"), pl.col("wait_ns") >= pl.col("held"))
              .group_by(*_STEP).agg(pl.col("rank").sort().alias("waiting_ranks")))
    return (named.join(waited, on=_STEP, how="left")
            .with_columns(pl.col("waiting_ranks").fill_null([]),
                          (pl.col("wait_ns") / pl.col("step_ns")).round(4).alias("held_share"))
            .select("run_id", "rank", "step", pl.col("wait_ns").alias("held_ns"), "waiting_ranks", "held_share",
                    "last_at", "collectives")
            .sort("run_id", "step", "rank"))


def priced(named: pl.DataFrame, *, min_cost_share: float = MIN_COST_SHARE) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``named`` stragglers with their price (``cost_ns`` of their step's ``step_ns``) split in those that cost
    their step at least ``min_cost_share`` of it, and the others (held the others, cost little)."""
    costly = pl.col("cost_ns").fill_null(0) >= min_cost_share * pl.col("step_ns").fill_null(0)
    return named.filter(costly), named.filter(~costly)
