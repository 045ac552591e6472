"""The labelling itself: a timeline and, where there is one, an isolated reference → every compute kernel
labelled, the per-rank summary and the slowed signatures.

The reference, in the order :func:`traceql.labelling.sources.choose` says: an isolated run given as baseline;
the trace's own isolated steps (``step_<i>_nosync``, run with communication off); else none, and the
single-trace detector labels. Against a reference, each kernel is compared with its twin
(``traceql.analyzers.baselines.twins``). Steps return their warnings instead of writing them anywhere.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from traceql.analyzers.baselines import kinds
from traceql.analyzers.baselines.isolated import clean_reference, match_rate
from traceql.analyzers.baselines.learned import chosen
from traceql.analyzers.baselines.physical import clock_ticks
from traceql.analyzers.baselines.twins import INPUTS as TWIN_INPUTS
from traceql.analyzers.baselines.twins import REFERENCE, no_baseline, reference_baselines
from traceql.analyzers.breakdown import rank_breakdown
from traceql.analyzers.cases import top_signatures
from traceql.analyzers.compat import hta_view
from traceql.analyzers.detection.ddp import copy_names, mark_copies
from traceql.analyzers.detection.features import COLUMNS, feature_table
from traceql.analyzers.detection.features import INPUTS as FEATURE_INPUTS
from traceql.analyzers.detection.labels import PAIRED_FACTOR, detector_labels, paired_labels, with_scores
from traceql.analyzers.metrics import curated_columns, join_metrics
from traceql.analyzers.overlap import comm_overlap
from traceql.analyzers.reports import step_cost
from traceql.errors import InputError
from traceql.labelling.causes import Priced, priced_causes
from traceql.labelling.inputs import Baseline, Timeline
from traceql.labelling.replayed import activities, with_cases
from traceql.labelling.result import DetectResult, empty_result, rank_summary
from traceql.labelling.sources import LabelSource, choose
from traceql.model import schema
from traceql.parallel import preload

if TYPE_CHECKING:
    from traceql.analyzers.detection.detector import SlowdownDetector

DETECTOR_MODULE = "traceql.analyzers.detection.detector"
LOW_MATCH = 0.5
LOW_METRICS_MATCH = 0.9


def import_detector() -> None:
    """Import the detector (scikit-learn: over a second) in a background thread: it runs while DuckDB reads
    the trace, which holds no Python lock; :func:`label` imports it then at no cost (or waits for it)."""
    preload(DETECTOR_MODULE)


def no_kernels(ranks: pl.DataFrame, has_metrics: bool, path: str) -> DetectResult:
    """A run with no compute kernels: an ncu-only input is an error, a CPU run is an empty result."""
    if has_metrics:
        raise InputError("Nsight Compute metrics are not a timeline: give them as detect TRACE --metrics PATH",
                         path=path)
    return empty_result(ranks, "no GPU kernels in this trace (a run on CPU?): nothing to label")


def prepared(kernels: pl.DataFrame, copies: pl.DataFrame | None = None,
             ticks: pl.DataFrame | None = None) -> pl.DataFrame:
    """The compute kernels of ``kernels`` with their overlap, ``ddp_copy`` (names of the run's DDP copies:
    ``copies``, else found in ``kernels``), a row id ``_row`` and their run's clock ``tick_ns`` (``ticks``,
    else read from ``kernels``)."""
    copies = copy_names(kernels) if copies is None else copies
    ticks = clock_ticks(kernels) if ticks is None else ticks
    return comm_overlap(kernels.with_columns(mark_copies(kernels, copies))).with_row_index("_row").join(
        ticks, on="run_id", how="left", maintain_order="left")


def feature_inputs(overlap: pl.DataFrame) -> pl.DataFrame:
    """What the features are computed from: the narrow columns of the kernels outside isolated steps (those are
    a reference, hidden from the detector)."""
    inputs = overlap.select(FEATURE_INPUTS)  # narrow: millions of rows are filtered and joined on few columns
    isolated = _isolated(overlap)
    return inputs.filter(~isolated) if isolated.any() else inputs


def scored(overlap: pl.DataFrame, features: pl.DataFrame, model: SlowdownDetector) -> pl.DataFrame:
    """The prepared kernels with the features of those outside isolated steps and their score by the fitted
    ``model`` (null where it judges none: isolated steps, no feature)."""
    if features.is_empty():  # every compute kernel is in an isolated step: nothing to fit the detector on
        added = features.with_columns(pl.lit(None, pl.Float64).alias("score"))
    else:
        added = with_scores(features, model)
    added = added.drop(FEATURE_INPUTS[1:])
    if _isolated(overlap).any():  # the isolated steps' rows get nulls
        added = overlap.select("_row").join(added, on="_row", how="left", maintain_order="left")
    return overlap.with_columns(added.drop("_row"))


def _scored(kernels: pl.DataFrame, model: SlowdownDetector, gpus: list[str | None]) -> pl.DataFrame:
    """Compute kernels with ``_row``, overlap, the detector's features and score (the detector fitted on the
    kernels outside isolated steps: those are a reference, hidden from it); the estimates' factors those of the
    detector, else the shipped ones where the run's ``gpus`` are of the kind they were learned on."""
    overlap = prepared(kernels)
    features = feature_table(feature_inputs(overlap), chosen(getattr(model, "estimate_factors", None), gpus))
    if not features.is_empty():
        model.fit(features.select(COLUMNS).to_numpy())
    return scored(overlap, features, model)


def _isolated(scored: pl.DataFrame) -> pl.Series:
    """Which kernels belong to the trace's isolated steps: a reference themselves, never cases."""
    return (scored["step_kind"] == "isolated").fill_null(False)


def _own(rows: pl.DataFrame) -> pl.DataFrame:
    return no_baseline(rows, REFERENCE)


def baseline_notes(rate: float, baseline: Baseline) -> list[str]:
    """What a baseline that ``rate`` of the compute kernels match calls for: its own notes, and a warning when
    it fits ill."""
    return list(baseline.notes) + ([f"warning: only {rate:.1%} of compute kernels match a baseline signature: "
                                    "was the baseline run with the same model and shapes?"] if rate < LOW_MATCH else [])


def _paired(scored: pl.DataFrame, baseline: Baseline, threshold: float) -> pl.DataFrame:
    isolated, slim = _isolated(scored), scored.select(TWIN_INPUTS)
    twins = reference_baselines(slim.filter(~isolated), baseline.kernels)
    return paired_labels(scored, pl.concat([twins, _own(slim.filter(isolated))]), threshold)


def _detected(scored: pl.DataFrame, model: SlowdownDetector) -> pl.DataFrame:
    """The detector's labels; the isolated steps' own kernels (hidden from it) stay a reference."""
    isolated = _isolated(scored)
    labelled = detector_labels(scored, model)  # the isolated rows have no features: never candidates
    if not isolated.any():
        return labelled
    mine = pl.lit(isolated)
    return labelled.with_columns(
        *(pl.when(mine).then(None).otherwise(pl.col(c)).alias(c)
          for c in ("baseline_ns", "twin_key", "twin_pos", "slowdown_ratio")),
        pl.when(mine).then(pl.lit(REFERENCE)).otherwise(pl.col("baseline_kind")).alias("baseline_kind"),
        pl.when(mine).then(pl.lit(kinds.NONE)).otherwise(pl.col("reference_kind")).alias("reference_kind"),
        (pl.col("is_slowdown") & ~mine).alias("is_slowdown"))


def _inrun_or_detected(scored: pl.DataFrame, model: SlowdownDetector, threshold: float,
                       runs: pl.Series | None = None, reference: pl.DataFrame | None = None,
                       ) -> tuple[pl.DataFrame, LabelSource]:
    """In-run labels for the runs that have isolated steps (``runs``, else those of ``scored``); the detector's
    for runs given with them that have none (``label_source`` says which, per row)."""
    with_steps = scored.filter(_isolated(scored))["run_id"].unique() if runs is None else runs
    mine = scored["run_id"].is_in(with_steps.implode())
    if mine.all():  # one run, or all with isolated steps: nothing to split
        return _inrun(scored, threshold, reference), LabelSource.INRUN
    inrun = _inrun(scored.filter(mine), threshold, reference)
    return pl.concat([inrun, _detected(scored.filter(~mine), model)], how="diagonal_relaxed").sort("_row"), \
        LabelSource.MIXED


def _inrun(scored: pl.DataFrame, threshold: float, reference: pl.DataFrame | None = None) -> pl.DataFrame:
    """Each normal step's kernels against their twins in the same rank's isolated steps (``reference``: those
    kernels, where ``scored`` is a window of a rank's steps that may hold none of them)."""
    isolated, slim = _isolated(scored), scored.select(TWIN_INPUTS)
    mine = slim.filter(scored.select(clean_reference()).to_series()) if reference is None else reference
    twins = reference_baselines(slim.filter(~isolated), mine, by=["run_id", "rank"])
    return paired_labels(scored, pl.concat([twins, _own(slim.filter(isolated))]), threshold,
                         source=LabelSource.INRUN.mode)


def decide(scored: pl.DataFrame, source: LabelSource, *, baseline: Baseline | None, model: SlowdownDetector,
           threshold: float, inrun_runs: pl.Series | None = None,
           inrun_reference: pl.DataFrame | None = None) -> tuple[pl.DataFrame, LabelSource]:
    """Every scored kernel labelled as ``source`` says: against ``baseline``, against the isolated steps of its
    rank (in the runs that have them: ``inrun_runs``, else those of ``scored``; ``inrun_reference``: the isolated
    steps' kernels, where ``scored`` is a window of a rank's steps), or by the fitted ``model``;
    and the source that did (in-run and detector where a run without isolated steps came with others)."""
    if source is LabelSource.BASELINE and baseline is not None:
        return _paired(scored, baseline, threshold), source
    if source is LabelSource.INRUN:
        return _inrun_or_detected(scored, model, threshold, inrun_runs, inrun_reference)
    return _detected(scored, model), source


def _with_metrics(labelled: pl.DataFrame, ncu: pl.DataFrame) -> tuple[pl.DataFrame, float, list[str]]:
    joined, rate = join_metrics(labelled, ncu)
    notes = [] if rate >= LOW_METRICS_MATCH else [
        f"warning: only {rate:.1%} of the profiled ncu launches match a kernel of the trace "
        "(same kernel name, grid, block and launch order): is it a profile of the same workload?"]
    return joined.select(*schema.CASES, *curated_columns(ncu), "ncu_match"), rate, notes


def label(timeline: Timeline, *, baseline: Baseline | None = None, threshold: float = PAIRED_FACTOR,
          top: int = 10, detector: SlowdownDetector | None = None, hta_compat: bool = False,
          metrics: pl.DataFrame | None = None, single_trace: bool = False, critical: bool = False) -> DetectResult:
    """Label every compute kernel of ``timeline``: against ``baseline`` when given, else against its isolated
    steps, else (or with ``single_trace``, its isolated steps hidden) by the detector; with ``critical``, what
    the cases cost on the critical path of its steps too (a replay: ``labelling.replayed``)."""
    kernels = timeline.kernels
    if kernels.filter(pl.col("kind") == "compute").is_empty():
        return no_kernels(timeline.ranks, timeline.has_metrics, str(timeline.path))
    notes = list(timeline.notes) + ([] if kernels.filter(pl.col("kind") == "comm").height else [
        f"note: {', '.join(kernels['run_id'].unique(maintain_order=True).to_list())}: no communication kernels: "
        "nothing overlaps, so no slowdown cases"])
    if detector is None:
        from traceql.analyzers.detection.detector import SlowdownDetector  # scikit-learn: see import_detector

        detector = SlowdownDetector.at(threshold)
    scored = _scored(kernels, detector, timeline.gpus)
    rate = metrics_rate = None
    source = choose(has_baseline=baseline is not None, has_isolated_steps=timeline.has_isolated_steps(),
                    single_trace=single_trace)
    if baseline is not None:
        rate = match_rate(scored, baseline.signatures.to_frame())
        notes += baseline_notes(rate, baseline)
    labelled, source = decide(scored, source, baseline=baseline, model=detector, threshold=threshold)
    del scored  # the features and estimates: only the labels' columns go on (millions of rows)
    out = labelled = labelled.select(*schema.CASES)
    if metrics is not None:
        out, metrics_rate, more = _with_metrics(labelled, metrics)
        notes += more
    view = hta_view(kernels, timeline.memops, timeline.nvtx) if hta_compat else (kernels, timeline.memops)
    steps = schema.conform(step_cost(labelled, kernels, timeline.memops), schema.STEP_COST)
    top_frame = schema.conform(top_signatures(labelled, top), schema.TOP_SIGNATURES)
    result = DetectResult(ranks=rank_summary(rank_breakdown(*view), labelled, steps), top_signatures=top_frame,
                          rows=out, mode=source.mode, match_rate=rate, notes=notes,
                          metrics_match_rate=metrics_rate, steps=steps)
    if critical:  # the activities made here and let go inside (a large run's replay is its peak)
        priced(result, priced_causes(with_cases(activities(kernels, timeline.memops, timeline.ranks), labelled),
                                     timeline.waits, steps))
    return result


def priced(result: DetectResult, found: Priced) -> None:
    """``result`` with its causes, its stragglers' cases and its critical path (``found``)."""
    result.causes, result.held, result.critical = found.causes, found.held, found.critical
    result.notes += found.notes
