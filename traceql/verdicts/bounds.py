"""What the trace allows the what-if to say of overlapping (the step breakdown's ``cause_times``, the figures
`ranks` prints):

- a step whose communication never ran beside computation (on any rank) is serialized already: its
  serialized what-if is its replay (:func:`serial_as_run`), whatever reordering the serialized graph makes;
- overlapping saves at most the communication that ran beside computation, and costs at most that and the
  contention (:func:`overlap_bound`): a serialized replay beyond either is said as the bound.
"""

from __future__ import annotations

from typing import cast

import polars as pl

from traceql.analyzers.causes import SLACK_NS

NONE_BESIDE_NS = 1_000  # communication beside computation this short a step (on every rank): none


def serial_as_run(steps: pl.DataFrame, times: pl.DataFrame) -> pl.DataFrame:
    """``steps`` (``replay.STEPS``) with ``serialized_ns`` (and ``untraced_serialized_ns``) as replayed in the
    steps whose communication never ran beside computation (``times``: ``step_breakdown.cause_times``)."""
    none = times.filter(pl.col("beside_ns") <= NONE_BESIDE_NS).select("run_id", "step", pl.lit(True).alias("_none"))
    out = steps.join(none, on=["run_id", "step"], how="left").with_columns(pl.col("_none").fill_null(False))
    return out.with_columns(
        pl.when(pl.col("_none")).then(pl.col("replayed_ns")).otherwise(pl.col("serialized_ns")).alias("serialized_ns"),
        pl.when(pl.col("_none")).then(pl.col("untraced_ns")).otherwise(pl.col("untraced_serialized_ns"))
        .alias("untraced_serialized_ns")).select(steps.columns)


def never_beside(times: pl.DataFrame) -> bool:
    """Whether no step of ``times`` (a run's judged steps' ``cause_times``) had communication beside
    computation (a median of none is not enough: half a run's steps may have run serialized)."""
    return not times.is_empty() and cast(int, times["beside_ns"].max()) <= NONE_BESIDE_NS


def overlap_bound(saves: int, contention: int | None, times: pl.DataFrame) -> tuple[int, int | None, bool]:
    """The run's overlap saving held to its bounds (module doc; ``times``: its judged steps' ``cause_times``,
    their median a step), the communication beside computation, and whether the saving was held."""
    if times.is_empty():
        return saves, None, False
    beside = round(cast(float, times["beside_ns"].median()))
    most, least = beside, -(beside + max(contention or 0, 0))
    if least - SLACK_NS <= saves <= most + SLACK_NS:
        return saves, beside, False
    return (most if saves > most else least), beside, True
