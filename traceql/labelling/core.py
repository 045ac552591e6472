"""What labelling a whole run (``label``) and a run a rank at a time (``by_rank``, ``passes``) share: the
compute kernels prepared (overlap, DDP copies, the clock's tick), the detector made and scoring them, and every
kernel labelled as its run's label source says (``modes.choose``): against an isolated run given as baseline,
against the trace's own isolated steps (``step_<i>_nosync``), or by the single-trace detector. Against a
reference, each kernel is compared with its twin (``traceql.analyzers.baselines.twins``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from traceql.analyzers.baselines import kinds
from traceql.analyzers.baselines.isolated import clean_reference
from traceql.analyzers.baselines.physical import clock_ticks
from traceql.analyzers.baselines.twins import INPUTS as TWIN_INPUTS
from traceql.analyzers.baselines.twins import REFERENCE, no_baseline, reference_baselines
from traceql.analyzers.detection.ddp import copy_names, mark_copies
from traceql.analyzers.detection.features import INPUTS as FEATURE_INPUTS
from traceql.analyzers.detection.labels import detector_labels, paired_labels, with_scores
from traceql.analyzers.overlap import comm_overlap
from traceql.errors import InputError
from traceql.labelling.inputs import Baseline
from traceql.labelling.modes import LabelSource
from traceql.labelling.result import DetectResult, empty_result

if TYPE_CHECKING:
    from traceql.analyzers.detection.detector import SlowdownDetector

LOW_MATCH = 0.5  # a baseline that fewer compute kernels match than this share is said to fit ill


def detector_for(threshold: float, given: SlowdownDetector | None = None) -> SlowdownDetector:
    """The detector a run is labelled with: ``given`` (a caller's own), else the shipped one at ``threshold``."""
    if given is not None:
        return given
    from traceql.analyzers.detection.detector import SlowdownDetector  # scikit-learn: loaded ahead, in a thread

    return SlowdownDetector.at(threshold)


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
    hidden = isolated(overlap)
    return inputs.filter(~hidden) if hidden.any() else inputs


def scored(overlap: pl.DataFrame, features: pl.DataFrame, model: SlowdownDetector) -> pl.DataFrame:
    """The prepared kernels with the features of those outside isolated steps and their score by the fitted
    ``model`` (null where it judges none: isolated steps, no feature)."""
    if features.is_empty():  # every compute kernel is in an isolated step: nothing to fit the detector on
        added = features.with_columns(pl.lit(None, pl.Float64).alias("score"))
    else:
        added = with_scores(features, model)
    added = added.drop(FEATURE_INPUTS[1:])
    if isolated(overlap).any():  # the isolated steps' rows get nulls
        added = overlap.select("_row").join(added, on="_row", how="left", maintain_order="left")
    return overlap.with_columns(added.drop("_row"))


def isolated(scored: pl.DataFrame) -> pl.Series:
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
    own, slim = isolated(scored), scored.select(TWIN_INPUTS)
    twins = reference_baselines(slim.filter(~own), baseline.kernels)
    return paired_labels(scored, pl.concat([twins, _own(slim.filter(own))]), threshold)


def _detected(scored: pl.DataFrame, model: SlowdownDetector) -> pl.DataFrame:
    """The detector's labels; the isolated steps' own kernels (hidden from it) stay a reference."""
    own = isolated(scored)
    labelled = detector_labels(scored, model)  # the isolated rows have no features: never candidates
    if not own.any():
        return labelled
    mine = pl.lit(own)
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
    with_steps = scored.filter(isolated(scored))["run_id"].unique() if runs is None else runs
    mine = scored["run_id"].is_in(with_steps.implode())
    if mine.all():  # one run, or all with isolated steps: nothing to split
        return _inrun(scored, threshold, reference), LabelSource.INRUN
    inrun = _inrun(scored.filter(mine), threshold, reference)
    return pl.concat([inrun, _detected(scored.filter(~mine), model)], how="diagonal_relaxed").sort("_row"), \
        LabelSource.MIXED


def _inrun(scored: pl.DataFrame, threshold: float, reference: pl.DataFrame | None = None) -> pl.DataFrame:
    """Each normal step's kernels against their twins in the same rank's isolated steps (``reference``: those
    kernels, where ``scored`` is a window of a rank's steps that may hold none of them)."""
    own, slim = isolated(scored), scored.select(TWIN_INPUTS)
    mine = slim.filter(scored.select(clean_reference()).to_series()) if reference is None else reference
    twins = reference_baselines(slim.filter(~own), mine, by=["run_id", "rank"])
    return paired_labels(scored, pl.concat([twins, _own(slim.filter(own))]), threshold,
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
