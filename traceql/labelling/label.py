"""A run labelled whole: a timeline and, where there is one, an isolated reference → every compute kernel
labelled (``core``), the per-rank summary and the slowed signatures; Nsight Compute metrics joined where given.
Steps return their warnings instead of writing them anywhere.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from traceql.analyzers.baselines.isolated import match_rate
from traceql.analyzers.baselines.learned import chosen
from traceql.analyzers.breakdown import rank_breakdown
from traceql.analyzers.cases import top_signatures
from traceql.analyzers.compat import hta_view
from traceql.analyzers.detection.features import COLUMNS, feature_table
from traceql.analyzers.detection.threshold import PAIRED_FACTOR
from traceql.analyzers.metrics import curated_columns, join_metrics
from traceql.analyzers.reports import step_cost
from traceql.labelling.core import (
    baseline_notes,
    decide,
    detector_for,
    feature_inputs,
    no_kernels,
    prepared,
    scored,
)
from traceql.labelling.inputs import Baseline, Timeline
from traceql.labelling.modes import choose, divided, factor_notes
from traceql.labelling.options import TOP
from traceql.labelling.result import DetectResult, rank_summary
from traceql.model import schema
from traceql.parallel import preload

if TYPE_CHECKING:
    from traceql.analyzers.detection.detector import SlowdownDetector

DETECTOR_MODULE = "traceql.analyzers.detection.detector"
LOW_METRICS_MATCH = 0.9


def import_detector() -> None:
    """Import the detector (scikit-learn: over a second) in a background thread: it runs while DuckDB reads
    the trace, which holds no Python lock; :func:`label` imports it then at no cost (or waits for it)."""
    preload(DETECTOR_MODULE)


def _scored(kernels: pl.DataFrame, model: SlowdownDetector, factors: pl.DataFrame) -> pl.DataFrame:
    """Compute kernels with ``_row``, overlap, the detector's features and score (the detector fitted on the
    kernels outside isolated steps: those are a reference, hidden from it), the estimates divided by
    ``factors``."""
    overlap = prepared(kernels)
    features = feature_table(feature_inputs(overlap), factors)
    if not features.is_empty():
        model.fit(features.select(COLUMNS).to_numpy())
    return scored(overlap, features, model)


def _with_metrics(labelled: pl.DataFrame, ncu: pl.DataFrame) -> tuple[pl.DataFrame, float, list[str]]:
    joined, rate = join_metrics(labelled, ncu)
    notes = [] if rate >= LOW_METRICS_MATCH else [
        f"warning: only {rate:.1%} of the profiled ncu launches match a kernel of the trace "
        "(same kernel name, grid, block and launch order): is it a profile of the same workload?"]
    return joined.select(*schema.CASES, *curated_columns(ncu), "ncu_match"), rate, notes


def label(timeline: Timeline, *, baseline: Baseline | None = None, threshold: float = PAIRED_FACTOR,
          top: int = TOP, detector: SlowdownDetector | None = None, hta_compat: bool = False,
          metrics: pl.DataFrame | None = None, single_trace: bool = False) -> DetectResult:
    """Label every compute kernel of ``timeline``: against ``baseline`` when given, else against its isolated
    steps, else (or with ``single_trace``, its isolated steps hidden) by the detector (``detector``, else the
    shipped one at ``threshold``)."""
    kernels = timeline.kernels
    if kernels.filter(pl.col("kind") == "compute").is_empty():
        return no_kernels(timeline.ranks, timeline.has_metrics, str(timeline.path))
    notes = list(timeline.notes) + ([] if kernels.filter(pl.col("kind") == "comm").height else [
        f"note: {', '.join(kernels['run_id'].unique(maintain_order=True).to_list())}: no communication kernels: "
        "nothing overlaps, so no slowdown cases"])
    detector = detector_for(threshold, detector)
    # the detector's factors, else the shipped ones where the run's GPUs are of a kind they were learned on
    factors = chosen(getattr(detector, "estimate_factors", None), timeline.gpus)
    judged = _scored(kernels, detector, factors)
    rate = metrics_rate = None
    source = choose(has_baseline=baseline is not None, has_isolated_steps=timeline.has_isolated_steps(),
                    single_trace=single_trace)
    if baseline is not None:
        rate = match_rate(judged, baseline.signatures.to_frame())
        notes += baseline_notes(rate, baseline)
    labelled, source = decide(judged, source, baseline=baseline, model=detector, threshold=threshold)
    notes += factor_notes(factors, source, divided(judged, factors))
    del judged  # the features and estimates: only the labels' columns go on (millions of rows)
    out = labelled = labelled.select(*schema.CASES)
    if metrics is not None:
        out, metrics_rate, more = _with_metrics(labelled, metrics)
        notes += more
    view = hta_view(kernels, timeline.memops, timeline.nvtx) if hta_compat else (kernels, timeline.memops)
    steps = schema.conform(step_cost(labelled, kernels, timeline.memops), schema.STEP_COST)
    top_frame = schema.conform(top_signatures(labelled, top), schema.TOP_SIGNATURES)
    return DetectResult(ranks=rank_summary(rank_breakdown(*view), labelled, steps), top_signatures=top_frame,
                        rows=out, mode=source.mode, match_rate=rate, notes=notes, metrics_match_rate=metrics_rate,
                        steps=steps)
