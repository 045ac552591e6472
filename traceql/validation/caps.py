"""Another bucket cap: `whatif --bucket-cap` on a configuration's stock run against the stock run of the same
model, GPUs and host at the other cap, both ways.

The prediction is the step as `whatif --bucket-cap` prices it (the replay of the run's trace, moved by
``analyzers.replay.rebucket``, contention as `detect` labels the run), the gradient sizes those of the example
model the run trained (``datasets/examples/<model>/gradients.json``); the measured step is the other run's trace
(first captured step left out, medians). Nothing is fitted on the matrix here but the collectives' speed alone
(``alone``, as in every what-if); the wire is the run's own.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from traceql.validation.matrix import Configuration, Matrix, MatrixRun, Predicted
from traceql.validation.whatifs import series_median


@dataclass(frozen=True)
class CapPrediction(Predicted):
    """One stock run's step at another cap, predicted and measured (ns, medians over steps)."""

    replayed_ns: float  # the run's own step, replayed
    predicted_ns: float
    measured_ns: float  # the other cap's stock run
    own_ns: float  # the run's own step, measured

    def before(self) -> tuple[float, float]:
        """The run's own step: replayed (what the prediction moves), measured (what the other cap's run moved)."""
        return self.replayed_ns, self.own_ns


def gradients_file(matrix: Matrix, run: MatrixRun) -> Path:
    """The example's gradients file for the model a run trained (its manifest names the example's folder)."""
    example = Path(run.manifest["input"]["path"]).name
    return matrix.root.parent / "examples" / example / "gradients.json"


def _ops(run: MatrixRun) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    from traceql.analyzers.replay.activities import activities, on_clock
    from traceql.labelling.inputs import read_timeline

    timeline = read_timeline(run.path())
    return on_clock(activities(timeline.kernels, timeline.memops, timeline.ranks)), timeline.waits


def at_cap(matrix: Matrix, run: MatrixRun, cap_mb: float) -> pl.DataFrame:
    """The run's steps as `whatif --bucket-cap` prices them (``bucket_cap_ns``; ``shift_ns``: its change from the
    replayed step), the first captured step left out."""
    from traceql.commands.whatif import whatif

    steps = whatif(run.path(), bucket_cap=cap_mb, gradients=gradients_file(matrix, run)).steps
    return steps.filter(~pl.col("first")).with_columns(
        (pl.col("bucket_cap_ns") - pl.col("replayed_ns")).alias("shift_ns"))


def measured_ns(run: MatrixRun) -> float:
    """The run's measured step (its trace's, first captured step left out, the median)."""
    from traceql.analyzers import replay

    ops, waits = _ops(run)
    steps = replay.steps(ops, waits=waits, ways=(), replay_trace=False).steps
    return series_median(steps.filter(~pl.col("first"))["measured_ns"])


def predict(matrix: Matrix, source: Configuration, target: Configuration) -> CapPrediction:
    """``source``'s stock run priced at ``target``'s cap against ``target``'s stock runs (the median of theirs)."""
    steps = at_cap(matrix, source.stock[0], target.cap)
    return CapPrediction(series_median(steps["replayed_ns"]), series_median(steps["bucket_cap_ns"]),
                         statistics.median(measured_ns(r) for r in target.stock), series_median(steps["measured_ns"]))


def pairs(matrix: Matrix) -> list[tuple[Configuration, Configuration]]:
    """Every (source, target): the same host, model and GPUs at two caps, both ways (the CPU-bound
    configurations left out: the model leaves out the CPU's launches)."""
    configs = {(c.gpu, c.model, c.world, c.cap): c for c in matrix.configurations()}
    out = []
    for (gpu, model, world, cap), cfg in sorted(configs.items()):
        for (g2, m2, w2, cap2), other in sorted(configs.items()):
            if (g2, m2, w2) == (gpu, model, world) and cap2 != cap and not model.endswith("b32"):
                out.append((cfg, other))
    return out


def rows(matrix: Matrix, progress: Callable[[str], None] = lambda _: None) -> list[dict[str, Any]]:
    """The validation rows: one per (source, target) pair."""
    out = []
    for source, target in pairs(matrix):
        progress(f"bucket cap: {source.name} -> {target.cap} MB")
        p = predict(matrix, source, target)
        out.append({"config": f"{source.name}->{target.cap}", "gpu": source.gpu, "model": source.model,
                    "world": source.world, "cap": source.cap, "to_cap": target.cap,
                    "own_ms": p.own_ns / 1e6, "predicted_ms": p.predicted_ns / 1e6,
                    "measured_ms": p.measured_ns / 1e6, "error": p.error,
                    "change_predicted_ms": p.change_predicted_ns / 1e6, "change_real_ms": p.change_real_ns / 1e6})
    return out
