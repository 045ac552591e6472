"""A long run replayed a window of steps at a time, so that what one replay holds is bounded by a window, not
by the run (a run of 32 ranks holds twelve million activities: its whole graph would not fit where its labels do).

A window holds the activities of a few consecutive normal steps of one run (about :data:`WINDOW` of them), the
step before them, the isolated steps numbered among them and the activity between its steps (by time). The step
before stands for what came before the window: it is replayed but not reported (every step is replayed on its
own in the whole run's replay too, its predecessors outside it at their measured or replayed ends, which the
step before gives). Every normal step is reported by one window; the run's first captured step keeps its mark.

What a window changes: the statistics the straggler what-if takes over a rank's other normal steps (its usual
lags and durations) are taken over the window's steps, and a recorded wait or a blocked CPU that reaches back
past the step before is not seen. The edges of a step before are counted twice in the graph's counts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import polars as pl

WINDOW = 500_000  # activities replayed at once (a replay holds about 600 B an activity) ...
MIN_STEPS = 8  # ... but no fewer normal steps than this a window (the straggler what-if's statistics)


@dataclass(frozen=True)
class Window:
    """The steps ``first`` .. ``last`` of run ``run_id`` (reported; the first starts at ``at``), the steps from
    ``since`` held (``since`` < ``first``: the step before, replayed as the window's start), between-step
    activity started in [``lo``, ``hi``) (None: unbounded)."""

    run_id: str
    since: int
    first: int
    last: int
    at: int
    lo: int | None
    hi: int | None

    def holds(self) -> pl.Expr:
        """Which activities the window holds (module doc)."""
        step = pl.col("step")
        numbered = step.is_between(self.since, self.last)
        if self.lo is None:  # the first window: what came before the first normal step too
            numbered |= step < self.first
        if self.hi is None:  # the last: what came after (isolated steps numbered past the last normal one)
            numbered |= step > self.last
        between = step.is_null()
        if self.lo is not None:
            between &= pl.col("start_ns") >= self.lo
        if self.hi is not None:
            between &= pl.col("start_ns") < self.hi
        return (pl.col("run_id") == self.run_id) & (numbered | between).fill_null(False)

    def before(self) -> pl.Expr:
        """Which of the activities it holds stand for what came before it (the step before and what ran
        between that and its first step): another window reports them."""
        if self.since == self.first:
            return pl.lit(False)
        return ((pl.col("step") == self.since) | (pl.col("step").is_null() & (pl.col("start_ns") < self.at))
                ).fill_null(False)


def plan(ops: pl.LazyFrame, size: int | None = None, min_steps: int | None = None) -> list[Window]:
    """The windows of ``ops`` (activities, ``graph.OP_COLUMNS``): per run, as few as hold about ``size``
    activities of normal steps each (default :data:`WINDOW`), but ``min_steps`` steps at least (default
    :data:`MIN_STEPS`), cut where the activity is even."""
    size = WINDOW if size is None else size
    min_steps = MIN_STEPS if min_steps is None else min_steps
    per = (ops.filter(pl.col("step_kind") == "sync")
           .group_by("run_id", "step").agg(pl.len().alias("n"), pl.col("start_ns").min().alias("t"))
           .sort("run_id", "step").collect())
    out = []
    for (run_id,), steps in per.group_by("run_id", maintain_order=True):
        number, at = steps["step"].to_list(), steps["t"].to_list()
        reach = steps["n"].cum_sum().to_numpy()
        k = max(1, min(-(-int(reach[-1]) // size), len(number) // max(min_steps, 1)))
        cuts = [0, *sorted({int(reach.searchsorted(reach[-1] * j / k)) + 1 for j in range(1, k)}), len(number)]
        for lo, hi in zip(cuts, cuts[1:], strict=False):
            if hi > lo:
                out.append(Window(str(run_id), number[max(lo - 1, 0)], number[lo], number[hi - 1], at[lo],
                                  at[lo - 1] if lo else None, at[hi] if hi < len(number) else None))
    return out


@dataclass(frozen=True)
class Windowed:
    """What each window's replay is asked (``replay.steps``' options), where its activities come from and, where
    they come without them, their cases (``cases``: :func:`with_cases`)."""

    ops: pl.LazyFrame
    options: dict[str, Any]
    cases: pl.DataFrame | None = None


def with_cases(ops: pl.DataFrame, cases: pl.DataFrame | None) -> pl.DataFrame:
    """``ops`` with their ``_case`` and ``_base`` from ``cases`` (the slowdown cases: the activities' key columns,
    ``_case`` and ``_base``), where given."""
    if cases is None:
        return ops
    key = [c for c in cases.columns if c not in ("_case", "_base")]
    return ops.join(cases, on=key, how="left", nulls_equal=True).with_columns(pl.col("_case").fill_null(False))


def window_steps(window: Window, job: Windowed) -> tuple[pl.DataFrame, tuple[int, ...]]:
    """One window replayed (``replay.steps`` on its activities): its reported steps and its graph's counts."""
    from traceql.analyzers.replay import steps

    ops = with_cases(job.ops.filter(window.holds()).collect(), job.cases)
    options = dict(job.options)
    named = options.pop("stragglers", None)
    if named is not None:
        named = named.filter(pl.col("run_id") == window.run_id, pl.col("step").is_between(window.first, window.last))
    waits = options.pop("waits", None)
    if waits is not None:
        waits = waits.filter(pl.col("run_id") == window.run_id)
    got = steps(ops, waits=waits, cases=ops["_case"] if "_case" in ops.columns else None,
                baseline=ops["_base"] if "_base" in ops.columns else None, stragglers=named, **options)
    mine = got.steps.filter(pl.col("step").is_between(window.first, window.last))
    own = ops.height - int(ops.select(window.before().sum()).item())
    return mine, (got.recorded, got.inferred, got.unexplained, got.forced, own, got.disordered)


Mapper = Callable[[Callable[[Window, Windowed], Any], list[Window], Windowed], Iterable[Any]]


def _serial(fn: Callable[[Window, Windowed], Any], items: list[Window], job: Windowed) -> Iterator[Any]:
    return (fn(item, job) for item in items)


def by_window(ops: pl.LazyFrame, cut: list[Window], options: dict[str, Any], mapper: Mapper | None = None,
              cases: pl.DataFrame | None = None) -> tuple[pl.DataFrame, list[int]]:
    """Every window of ``cut`` replayed (``options``: ``replay.steps``' keyword arguments but the cases and
    baselines, which are the activities' ``_case`` and ``_base``, or ``cases``'), one after another or through
    ``mapper`` (``mapper(fn, windows, job)`` yields ``fn(window, job)`` for each, in order); the steps and the
    summed counts (``replay.WhatIf``'s)."""
    frames, counts = [], [0] * 6
    for frame, got in (mapper or _serial)(window_steps, cut, Windowed(ops, options, cases)):
        frames.append(frame)
        counts = [a + b for a, b in zip(counts, got, strict=True)]
    steps = pl.concat(frames)
    first = steps.group_by("run_id").agg(pl.col("step").min().alias("_first"))
    steps = steps.join(first, on="run_id", how="left").with_columns((pl.col("step") == pl.col("_first"))
                                                                    .alias("first")).drop("_first")
    return steps.sort("run_id", "step"), counts
