"""The run as it runs without the profiler: its steps inside the capture (traced) against the steps of the same
processes outside it (untraced), both timed by the wall clock between synchronised step edges.

`traceql collect` times every step of every rank (``step_times_ms`` of its rank results: epoch, step, ms, whether
the step was in the profiled window, whether it was an isolated step). Outside nsys's capture range (and outside
torch.profiler's schedule) a step runs at untraced speed in the same process, so the two medians tell what
tracing cost the step. A step's time is the slowest rank's (the ranks meet at every step's end); the window's
first step (the capture starting) and the run's first step (warm-up: allocation, NCCL's set-up, DDP's bucket
rebuild) are left out, as are isolated steps and the window's steps a straggler or a GPU delay was injected
into (their lateness is the counterfactual's, not the profiler's). A run of ``comm=alternate`` marks its
serialized steps (``serial``); the stock ones are its steps, unless the serialized ones are asked for.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

INFLATION_SAID = 0.05  # a traced step this much longer than the untraced one is said to describe the traced run
MIN_STEPS = 3  # steps a side at the least: fewer tell a run's noise, not the profiler's cost


@dataclass(frozen=True)
class Untraced:
    """A run's median step inside the profiled window (``traced_ms``) and outside it (``untraced_ms``), over
    ``traced_steps`` and ``untraced_steps`` steps."""

    traced_ms: float
    untraced_ms: float
    traced_steps: int
    untraced_steps: int

    @property
    def inflation(self) -> float:
        """How much longer the traced step is, as a share of the untraced one."""
        return self.traced_ms / self.untraced_ms - 1


def step_walls(ranks: Iterable[Iterable[Mapping[str, Any]]]) -> dict[tuple[bool, int, int], tuple[float, bool]]:
    """Per step a run's ranks timed (``ranks``: each rank's ``step_times_ms``), keyed (inside the profiled
    window, epoch, step): the slowest rank's wall time and whether it was a serialized step of ``comm=alternate``;
    isolated steps and records without a time, an epoch or a step left out."""
    slowest: dict[tuple[bool, int, int], tuple[float, bool]] = {}
    for times in ranks:
        for t in times:
            if t.get("isolated") or not _number(t.get("ms")) or not all(isinstance(t.get(k), int)
                                                                         for k in ("epoch", "step")):
                continue
            key = (bool(t.get("window")), t["epoch"], t["step"])
            slowest[key] = (max(slowest.get(key, (0.0, False))[0], float(t["ms"])), bool(t.get("serial")))
    return slowest


def untraced(ranks: Iterable[Iterable[Mapping[str, Any]]], injected: Collection[int] = (), *,
             serial: bool = False) -> Untraced | None:
    """The traced and untraced steps of a run whose ranks timed ``ranks`` (each rank's ``step_times_ms``), but the
    window's steps ``injected`` (numbers of steps a counterfactual made late) and, in a run that alternates, the
    steps of the other kind (``serial``: the serialized ones); None where either side has fewer than
    :data:`MIN_STEPS` steps (a run profiled whole, one that records no step times)."""
    slowest = {key: ms for key, (ms, kind) in step_walls(ranks).items()
               if kind == serial and not (key[0] and key[2] in injected)}
    window = [ms for (inside, _, _), ms in sorted(slowest.items()) if inside][1:]  # the capture's start left out
    first = min(((e, s) for _, e, s in slowest), default=None)
    outside = [ms for (inside, e, s), ms in sorted(slowest.items()) if not inside and (e, s) != first]
    if len(window) < MIN_STEPS or len(outside) < MIN_STEPS:
        return None
    return Untraced(statistics.median(window), statistics.median(outside), len(window), len(outside))


def inflation_note(run_id: str, found: Untraced | None) -> str | None:
    """What a verdict on the run says of the profiler's cost, where the traced step is more than
    :data:`INFLATION_SAID` longer than the untraced one; None elsewhere."""
    if found is None or found.inflation <= INFLATION_SAID:
        return None
    return (f"note: {run_id}: steps took {found.traced_ms:,.1f} ms traced, {found.untraced_ms:,.1f} ms untraced "
            f"({found.inflation:+.0%}, medians of {found.traced_steps} and {found.untraced_steps} steps): the "
            "profiler slowed the run, and CPU-side figures describe the traced run")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
