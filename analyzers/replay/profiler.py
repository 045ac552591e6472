"""The run without the profiler: its replay with the CPU's time as it runs untraced.

Under a tracing profiler every CUDA call and the CPU work between calls run slower (nsys's CUDA trace: 1.1-2.3x on
launch-bound library models, `datasets/library`), while the GPU's kernels keep their speed. A launch-bound step
is set by that CPU time, so the trace's step is the profiler's. Where the run also timed steps outside the
capture (`traceql collect` does), the replay takes the CPU time into every launch call (the lags of its
``CHAIN`` and ``BLOCKED`` edges: the CPU's own time since the call before it, or since the GPU work it waited
for) scaled by one factor, the factor whose replay gives the untraced median step (:func:`calibrated`); every
what-if replayed on that graph is the what-if of the run without the profiler.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from traceql.analyzers.replay.engine import Graph, Replayed, replay
from traceql.analyzers.replay.graph import BLOCKED, CHAIN, RunGraph
from traceql.analyzers.untraced import INFLATION_SAID

ROUNDS = 12  # replays at the most to find the factor
TOLERANCE = 0.001  # a replayed median step this close to the untraced one (a share of it) is found


def cpu_scaled(rg: RunGraph, factor: float) -> Graph:
    """``rg``'s graph with the CPU's own time before every launch call scaled by ``factor`` (module doc)."""
    g = rg.graph
    node = rg.edge_nodes(g)
    cpu = np.isin(rg.edge_kind, (CHAIN, BLOCKED)) & (node >= rg.n_ops)
    lag = g.pred_lag.copy()
    lag[cpu] = np.round(lag[cpu] * factor).astype(np.int64)
    return replace(g, pred_lag=lag)


@dataclass
class Calibrated:
    """The CPU factor found, its graph and replay, the median step it gives, and what it had to reach."""

    factor: float
    graph: Graph
    replayed: Replayed
    step_ns: float
    target_ns: float

    @property
    def residual_ns(self) -> float:
        """What the CPU alone could not take out of the step (0 where the factor reached the target)."""
        return max(self.step_ns - self.target_ns, 0.0)


def calibrated(rg: RunGraph, part: np.ndarray, fixed: Replayed, ratio: float,
               step_of: Callable[[Replayed], float]) -> Calibrated:
    """The CPU factor (0..1) whose replay (each step on its own, ``part``, the rest at ``fixed``) gives a median
    step (``step_of``) of ``ratio`` times the replay of the trace's own times (``ratio``: the untraced median
    step over the traced one); at 1 where the profiler slowed the step :data:`INFLATION_SAID` or less (what no
    verdict calls its cost: the run's own noise), at 0 where even no CPU time at all leaves the step longer
    (:attr:`Calibrated.residual_ns`)."""
    full = step_of(fixed)
    target = full * min(ratio, 1.0)

    def at(factor: float) -> tuple[Graph, Replayed, float]:
        g = cpu_scaled(rg, factor)
        done = replay(g, part, fixed)
        return g, done, step_of(done)

    if ratio * (1 + INFLATION_SAID) >= 1.0:
        return Calibrated(1.0, rg.graph, fixed, full, full)
    # the step grows with the factor, near linearly: regula falsi (Illinois), the bracket [lo, hi] kept
    lo, hi, f_hi = 0.0, 1.0, full - target
    g, done, step = at(0.0)
    if step >= target:
        return Calibrated(0.0, g, done, step, target)
    f_lo, side = step - target, 0
    best = Calibrated(0.0, g, done, step, target)
    for _ in range(ROUNDS):
        mid = (lo * f_hi - hi * f_lo) / (f_hi - f_lo) if f_hi != f_lo else (lo + hi) / 2
        g, done, step = at(mid)
        value = step - target
        if abs(value) < abs(best.step_ns - best.target_ns):
            best = Calibrated(mid, g, done, step, target)
        if abs(value) <= TOLERANCE * target:
            break
        if value > 0:
            hi, f_hi = mid, value
            if side == 1:
                f_lo /= 2
            side = 1
        else:
            lo, f_lo = mid, value
            if side == -1:
                f_hi /= 2
            side = -1
    return best
