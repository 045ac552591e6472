"""The serialized what-if against runs that alternate stock and serialized steps in one process.

A launch-bound model's step moves tens of ms from one run to the next (the CPU it got, the profiler's cost), so
a stock run and a serialized run side by side measure the overlap saving only to ±10-20 ms. A run collected
with ``comm=alternate`` (``collectors/counterfactuals.py``) takes its odd steps serialized and its even steps
stock, on one CPU and one GPU: the *real saving* of a step pair is the mean of the two serialized steps around a
stock step less that stock step (a drift over the run cancels), traced (inside the capture) and untraced (the
same processes outside it, as their ranks timed them).

The what-if is asked about the stock steps alone: its serialized step for each (the replay's
``serialized_ns``), and without the profiler the stock steps' untraced median times the replay's untraced
serialized over untraced step, as for the other runs (``whatifs._untraced``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from traceql.analyzers.replay.alone import CommAlone
from traceql.analyzers.untraced import step_walls
from traceql.validation.matrix import Matrix, MatrixRun
from traceql.validation.whatifs import RESAMPLES, idle_of, median, serialized_steps, series_median, untraced_of


def serial_steps(run: MatrixRun) -> set[int]:
    """The numbers of the window's steps that deferred their all-reduces (every rank's result agrees)."""
    return {t["step"] for r in run.results() for t in r.get("step_times_ms", [])
            if t.get("window") and t.get("serial")}


def pair_savings(steps: list[tuple[int, float, bool]]) -> list[float]:
    """Each stock step's real saving: the mean of the serialized steps on either side of it, less it.

    Args:
        steps: (step number, ms, serialized) in step order; a pair needs both neighbours, numbered next to it.
    Returns:
        One saving (ms) per stock step that has both neighbours.
    """
    out = []
    for (na, a, sa), (n, ms, s), (nb, b, sb) in zip(steps, steps[1:], steps[2:], strict=False):
        if not s and sa and sb and na == n - 1 and nb == n + 1:
            out.append((a + b) / 2 - ms)
    return out


def _timed(run: MatrixRun, window: bool) -> list[tuple[int, float, bool]]:
    """The run's steps inside (or outside) the capture, as its ranks timed them (``analyzers.untraced.step_walls``):
    (place in time, the slowest rank's ms, serialized); the run's first step (warm-up) and the capture's first
    left out."""
    walls = step_walls(r.get("step_times_ms", []) for r in run.results())
    keys = sorted(k for k in walls if k[0] == window)
    return [(i, *walls[k]) for i, k in enumerate(keys) if i > 0]  # warm-up or the capture's start


@dataclass(frozen=True)
class AlternatingRun:
    """One alternating run, traced and untraced (ms): the stock steps' median, the overlap saving the what-if
    predicts for them (serialized less stock), the real savings of its step pairs (:func:`pair_savings`)."""

    run: MatrixRun
    stock_ms: float  # wall clock, the median over the captured stock steps
    saving_ms: float  # the median over stock steps of the replay's serialized_ns less its measured_ns
    real_savings: tuple[float, ...]
    untraced_stock_ms: float | None = None
    untraced_saving_ms: float | None = None  # the untraced step times the replay's untraced serialized / untraced
    untraced_savings: tuple[float, ...] = ()


def alternating_run(run: MatrixRun, comm: CommAlone | None = None) -> AlternatingRun:
    """The what-if on one alternating run's stock steps (the collectives alone as ``comm`` says) against its step
    pairs (:class:`AlternatingRun`)."""
    steps = serialized_steps(run, comm).filter(~pl.col("step").is_in(sorted(serial_steps(run))))
    inside, outside = _timed(run, window=True), _timed(run, window=False)
    found = untraced_of(run)
    untraced: dict[str, float] = {}
    if found is not None and steps["untraced_ns"].null_count() < steps.height:
        ratio = series_median(steps["untraced_serialized_ns"]) / series_median(steps["untraced_ns"])
        untraced = {"untraced_stock_ms": found.untraced_ms, "untraced_saving_ms": found.untraced_ms * (ratio - 1)}
    return AlternatingRun(run, median([ms for _, ms, s in inside if not s]),
                          series_median(steps["serialized_ns"] - steps["measured_ns"]) / 1e6,
                          tuple(pair_savings(inside)), **untraced, untraced_savings=tuple(pair_savings(outside)))


@dataclass(frozen=True)
class AlternatingModel:
    """A model's alternating runs on one GPU kind together (ms; medians over runs, savings over every pair)."""

    kind: str
    model: str
    runs: int
    idle: float | None
    stock_ms: float
    saving_ms: float
    real_ms: float
    real_interval_ms: tuple[float, float]
    untraced_stock_ms: float | None
    untraced_saving_ms: float | None
    untraced_real_ms: float | None
    untraced_interval_ms: tuple[float, float]

    @property
    def error(self) -> float:
        """The serialized step predicted against the real one (the stock step plus each saving), relative."""
        return (self.saving_ms - self.real_ms) / (self.stock_ms + self.real_ms)

    @property
    def untraced_error(self) -> float | None:
        if self.untraced_stock_ms is None or self.untraced_saving_ms is None or self.untraced_real_ms is None:
            return None
        return (self.untraced_saving_ms - self.untraced_real_ms) / (self.untraced_stock_ms + self.untraced_real_ms)


def by_model(runs: list[AlternatingRun], idle: dict[str, float | None]) -> list[AlternatingModel]:
    """Each (GPU kind, model)'s runs pooled (``idle``: each run label's GPU idle share)."""
    groups: dict[tuple[str, str], list[AlternatingRun]] = {}
    for a in runs:
        groups.setdefault((a.run.kind, a.run.model), []).append(a)
    out = []
    for (kind, model), group in sorted(groups.items()):
        pairs = [x for a in group for x in a.real_savings]
        upairs = [x for a in group for x in a.untraced_savings]
        ustock = [a.untraced_stock_ms for a in group if a.untraced_stock_ms is not None]
        usave = [a.untraced_saving_ms for a in group if a.untraced_saving_ms is not None]
        idles = [i for i in (idle.get(a.run.label) for a in group) if i is not None]
        out.append(AlternatingModel(
            kind, model, len(group), median(idles) if idles else None, median([a.stock_ms for a in group]),
            median([a.saving_ms for a in group]), median(pairs), interval(pairs),
            median(ustock) if ustock else None, median(usave) if usave else None,
            median(upairs) if upairs else None, interval(upairs)))
    return out


def interval(values: list[float]) -> tuple[float, float]:
    """The 95 % interval of the median of ``values`` (a seeded bootstrap: the same every time)."""
    if not values:
        return float("nan"), float("nan")
    draws = np.median(np.random.default_rng(0).choice(np.asarray(values), (RESAMPLES, len(values))), axis=1)
    return float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))


def rows(library: Matrix, comm: CommAlone, progress: Callable[[str], None]) -> list[dict[str, Any]]:
    """Per (GPU kind, model) of ``library``'s alternating runs, the serialized what-if against the step pairs,
    traced and untraced, as the validation page's rows (ms)."""
    runs = [r for r in library.runs if r.role == "alt"]
    done = []
    for r in runs:
        progress(f"serialized, alternating: {r.label}")
        done.append(alternating_run(r, comm))
    out = []
    for m in by_model(done, {r.label: idle_of(r) for r in runs}):
        row = {"config": f"{m.kind} {m.model} 2g cap25", "gpu": m.kind, "model": m.model, "runs": m.runs,
               "idle": m.idle, "stock_ms": m.stock_ms, "predicted_ms": m.stock_ms + m.saving_ms,
               "measured_ms": m.stock_ms + m.real_ms, "error": m.error, "saves_predicted_ms": m.saving_ms,
               "saves_real_ms": m.real_ms, "real_low_ms": m.real_interval_ms[0], "real_high_ms": m.real_interval_ms[1]}
        if m.untraced_error is not None:
            row.update(untraced_stock_ms=m.untraced_stock_ms, untraced_saves_predicted_ms=m.untraced_saving_ms,
                       untraced_saves_real_ms=m.untraced_real_ms, untraced_real_low_ms=m.untraced_interval_ms[0],
                       untraced_real_high_ms=m.untraced_interval_ms[1], untraced_error=m.untraced_error)
        out.append(row)
    return out
