"""The labelling pipeline that `detect` and `dataset add` share: a timeline (a trace's kernels, memory
operations and annotations) and an isolated reference → every compute kernel labelled, the per-rank summary
and the slowed signatures.

The reference, in order of preference: an isolated run given as baseline (``label_source`` baseline); the
trace's own isolated steps (``step_<i>_nosync``, run with communication off: ``inrun``); else none, and the
single-trace detector labels (``detector``). Against a reference, each kernel is compared with its twin
(``traceql.analyzers.baselines.twins``).

Each input is read once (:func:`read_timeline`, :func:`read_baseline`); :func:`label` only computes. Steps
return their warnings instead of writing them anywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from traceql.analyzers.baselines.isolated import match_rate
from traceql.analyzers.baselines.twins import INPUTS as TWIN_INPUTS
from traceql.analyzers.baselines.twins import REFERENCE, no_baseline, reference_baselines
from traceql.analyzers.breakdown import rank_breakdown
from traceql.analyzers.cases import rank_cases, top_signatures
from traceql.analyzers.compat import hta_view
from traceql.analyzers.detection.ddp import bucket_copies
from traceql.analyzers.detection.features import COLUMNS, feature_table
from traceql.analyzers.detection.features import INPUTS as FEATURE_INPUTS
from traceql.analyzers.detection.labels import PAIRED_FACTOR, detector_labels, paired_labels, with_scores
from traceql.analyzers.metrics import curated_columns, join_metrics
from traceql.analyzers.overlap import comm_overlap
from traceql.analyzers.reports import step_cost
from traceql.errors import InputError
from traceql.model import schema
from traceql.model.names import with_keys, with_signature
from traceql.sources import inputs
from traceql.sources.ncu import read_ncu
from traceql.trace import read_trace

if TYPE_CHECKING:
    from traceql.analyzers.detection.detector import SlowdownDetector

LOW_MATCH = 0.5
LOW_METRICS_MATCH = 0.9


@dataclass
class DetectResult:
    """What `detect` found: per-rank summary, top slowed signatures, one row per compute kernel."""

    ranks: pl.DataFrame
    top_signatures: pl.DataFrame
    kernels: pl.DataFrame
    mode: str
    match_rate: float | None = None
    notes: list[str] = field(default_factory=list)
    metrics_match_rate: float | None = None
    steps: pl.DataFrame = field(default_factory=lambda: schema.empty(schema.STEP_COST))

    def baseline_kinds(self) -> dict[str, int]:
        """How many compute kernels got each kind of baseline (twin, key-median, estimate, none)."""
        if self.kernels.is_empty():
            return {}
        return dict(self.kernels.group_by("baseline_kind").len().sort("baseline_kind").iter_rows())

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "baseline_kinds": self.baseline_kinds(),
            "baseline_match_rate": None if self.match_rate is None else round(self.match_rate, 4),
            "metrics_match_rate": None if self.metrics_match_rate is None else round(self.metrics_match_rate, 4),
            "ranks": self.ranks.to_dicts(),
            "top_signatures": self.top_signatures.to_dicts(),
            "steps": self.steps.to_dicts(),
            "totals": {
                "compute_kernels": self.kernels.height,
                "cases": int(self.kernels["is_slowdown"].sum()),
                "time_lost_ns": int(self.ranks["time_lost_ns"].sum()) if self.ranks.height else 0,
            },
            "notes": self.notes,
        }


@dataclass
class Timeline:
    """A trace's GPU timeline, read once: kernels (with ``signature`` and ``key``, their steps), memory
    operations, annotations."""

    path: Path
    kernels: pl.DataFrame
    memops: pl.DataFrame
    nvtx: pl.DataFrame
    ranks: pl.DataFrame
    has_metrics: bool  # the input held Nsight Compute metrics (which are not a timeline)
    notes: list[str] = field(default_factory=list)  # what reading it had to do differently
    steps: pl.DataFrame = field(default_factory=lambda: schema.empty(schema.RELATIONS["steps"]))  # step ranges

    def signatures(self) -> pl.Series:
        return self.kernels.filter(pl.col("kind") == "compute")["signature"]

    def has_isolated_steps(self) -> bool:
        return bool((self.kernels["step_kind"] == "isolated").any())


@dataclass
class Baseline:
    """An isolated run, read once: its compute kernels (keyed, with steps) and what is wrong with it."""

    path: Path
    kernels: pl.DataFrame
    notes: list[str]

    @property
    def signatures(self) -> pl.Series:
        return self.kernels["signature"].unique()


def read_timeline(paths: str | Path | Sequence[str | Path] | None) -> Timeline:
    """Read the timeline of a trace (files or folders; the embedded example when None)."""
    with read_trace(paths) as trace:
        return Timeline(trace.paths[0], with_keys(trace.relation("kernels", compact=True)), trace.memcpy,
                        trace.nvtx, trace.ranks, not trace.relation("kernel_metrics").is_empty(), trace.notes,
                        trace.relation("steps"))


def read_baseline(paths: str | Path | Sequence[str | Path]) -> Baseline:
    """Read an isolated run's compute kernels; a note when it holds communication (not isolated)."""
    with read_trace(paths) as iso:
        kernels = iso.relation("kernels", compact=True)
        path = iso.paths[0]
        notes = list(iso.notes)
    comm = kernels.filter(pl.col("kind") == "comm").height
    notes += [f"warning: the baseline has {comm} communication kernels: it is not an isolated run "
              "(record it on one GPU without DDP/NCCL)"] if comm else []
    return Baseline(path, with_keys(kernels.filter(pl.col("kind") == "compute")), notes)


def read_metrics(paths: Sequence[str | Path]) -> pl.DataFrame:
    """Nsight Compute launch metrics (with ``signature``) from ncu CSVs; InputError for anything else."""
    files = inputs.resolve(list(paths))
    for f in files:
        if f.fmt != "ncu-csv":
            raise InputError("not an Nsight Compute CSV (give ncu --csv --page raw|details output)", path=str(f.path))
    return with_signature(pl.concat([read_ncu(f.path).metrics for f in files], how="diagonal_relaxed"))


def _no_kernels(timeline: Timeline) -> DetectResult:
    """A trace with no compute kernels: an ncu-only input is an error, a CPU run is an empty result."""
    if timeline.has_metrics:
        raise InputError("Nsight Compute metrics are not a timeline: give them as detect TRACE --metrics PATH",
                         path=str(timeline.path))
    zeros = [pl.lit(0 if t == pl.Int64 else None, dtype=t).alias(c) for c, t in schema.RANK_SUMMARY.items()]
    return DetectResult(ranks=timeline.ranks.select("run_id", "rank", *zeros),
                        top_signatures=schema.empty(schema.TOP_SIGNATURES), kernels=schema.empty(schema.CASES),
                        mode="none", notes=["no GPU kernels in this trace (a run on CPU?): nothing to label"])


def _scored(kernels: pl.DataFrame, model: SlowdownDetector) -> pl.DataFrame:
    """Compute kernels with ``_row``, overlap, the detector's features and score (the detector fitted on the
    kernels outside isolated steps: those are a reference, hidden from it)."""
    overlap = comm_overlap(kernels.with_columns(bucket_copies(kernels))).with_row_index("_row")
    isolated = _isolated(overlap)
    inputs = overlap.select(FEATURE_INPUTS)  # narrow: millions of rows are filtered and joined on few columns
    features = feature_table(inputs.filter(~isolated) if isolated.any() else inputs)
    if features.is_empty():  # every compute kernel is in an isolated step: nothing to fit the detector on
        added = features.with_columns(pl.lit(None, pl.Float64).alias("score"))
    else:
        model.fit(features.select(COLUMNS).to_numpy())
        added = with_scores(features, model)
    added = added.drop(FEATURE_INPUTS[1:])
    if isolated.any():  # the isolated steps' rows get nulls
        added = overlap.select("_row").join(added, on="_row", how="left", maintain_order="left")
    return overlap.with_columns(added.drop("_row"))


def _paired(scored: pl.DataFrame, baseline: Baseline, threshold: float) -> tuple[pl.DataFrame, float, list[str]]:
    rate = match_rate(scored, baseline.signatures.to_frame())
    notes = list(baseline.notes)
    if rate < LOW_MATCH:
        notes.append(f"warning: only {rate:.1%} of compute kernels match a baseline signature: "
                     "was the baseline run with the same model and shapes?")
    isolated, slim = _isolated(scored), scored.select(TWIN_INPUTS)
    twins = reference_baselines(slim.filter(~isolated), baseline.kernels)
    return paired_labels(scored, pl.concat([twins, _own(slim.filter(isolated))]), threshold), rate, notes


def _isolated(scored: pl.DataFrame) -> pl.Series:
    """Which kernels belong to the trace's isolated steps: a reference themselves, never cases."""
    return (scored["step_kind"] == "isolated").fill_null(False)


def _own(rows: pl.DataFrame) -> pl.DataFrame:
    return no_baseline(rows, REFERENCE)


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
        (pl.col("is_slowdown") & ~mine).alias("is_slowdown"))


def _inrun_or_detected(scored: pl.DataFrame, model: SlowdownDetector, threshold: float) -> tuple[pl.DataFrame, str]:
    """In-run labels for the runs that have isolated steps; the detector's for runs given with them that
    have none (``label_source`` says which, per row)."""
    with_steps = scored.filter(_isolated(scored))["run_id"].unique()
    mine = scored["run_id"].is_in(with_steps.implode())
    if mine.all():  # one run, or all with isolated steps: nothing to split
        return _inrun(scored, threshold), "inrun"
    inrun = _inrun(scored.filter(mine), threshold)
    return pl.concat([inrun, _detected(scored.filter(~mine), model)], how="diagonal_relaxed").sort("_row"), \
        "inrun+detector"


def _inrun(scored: pl.DataFrame, threshold: float) -> pl.DataFrame:
    """Each normal step's kernels against their twins in the same rank's isolated steps."""
    isolated, slim = _isolated(scored), scored.select(TWIN_INPUTS)
    twins = reference_baselines(slim.filter(~isolated), slim.filter(isolated), by=["run_id", "rank"])
    return paired_labels(scored, pl.concat([twins, _own(slim.filter(isolated))]), threshold, source="inrun")


def _with_metrics(labelled: pl.DataFrame, ncu: pl.DataFrame) -> tuple[pl.DataFrame, float, list[str]]:
    joined, rate = join_metrics(labelled, ncu)
    notes = [] if rate >= LOW_METRICS_MATCH else [
        f"warning: only {rate:.1%} of the profiled ncu launches match a kernel of the trace "
        "(same kernel name, grid, block and launch order): is it a profile of the same workload?"]
    return joined.select(*schema.CASES, *curated_columns(ncu), "ncu_match"), rate, notes


def label(timeline: Timeline, *, baseline: Baseline | None = None, threshold: float = PAIRED_FACTOR,
          top: int = 10, detector: SlowdownDetector | None = None, hta_compat: bool = False,
          metrics: pl.DataFrame | None = None, single_trace: bool = False) -> DetectResult:
    """Label every compute kernel of ``timeline``: against ``baseline`` when given, else against its isolated
    steps, else (or with ``single_trace``, its isolated steps hidden) by the detector."""
    kernels = timeline.kernels
    if kernels.filter(pl.col("kind") == "compute").is_empty():
        return _no_kernels(timeline)
    notes = list(timeline.notes) + ([] if kernels.filter(pl.col("kind") == "comm").height else [
        "no communication kernels in this trace: nothing overlaps, so no slowdown cases"])
    if detector is None:
        from traceql.analyzers.detection.detector import SlowdownDetector  # scikit-learn: see traceql.commands.detect

        detector = SlowdownDetector(threshold=threshold)
    model = detector
    scored = _scored(kernels, model)
    rate = metrics_rate = None
    if baseline is not None:
        labelled, rate, more = _paired(scored, baseline, threshold)
        notes += more
        mode = "baseline"
    elif timeline.has_isolated_steps() and not single_trace:
        labelled, mode = _inrun_or_detected(scored, model, threshold)
    else:
        labelled, mode = _detected(scored, model), "detector"
    del scored  # the features and estimates: only the labels' columns go on (millions of rows)
    out = labelled = labelled.select(*schema.CASES)
    if metrics is not None:
        out, metrics_rate, more = _with_metrics(labelled, metrics)
        notes += more
    view = hta_view(kernels, timeline.memops, timeline.nvtx) if hta_compat else (kernels, timeline.memops)
    steps = schema.conform(step_cost(labelled, kernels, timeline.memops), schema.STEP_COST)
    top_frame = schema.conform(top_signatures(labelled, top), schema.TOP_SIGNATURES)
    return DetectResult(ranks=_rank_summary(rank_breakdown(*view), labelled, steps), top_signatures=top_frame,
                        kernels=out, mode=mode, match_rate=rate, notes=notes, metrics_match_rate=metrics_rate,
                        steps=steps)


def _rank_summary(breakdown: pl.DataFrame, labelled: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """The breakdown per rank, its cases and time lost, and that as a share of its normal steps' GPU time
    (of the capture span when the trace has no steps)."""
    step_time = steps.group_by("run_id", "rank").agg(pl.col("gpu_ns").sum().alias("step_time_ns"))
    ranks = (breakdown.join(rank_cases(labelled), on=["run_id", "rank"], how="left", maintain_order="left")
             .join(step_time, on=["run_id", "rank"], how="left", maintain_order="left")
             .with_columns(pl.col("compute_kernels", "cases", "time_lost_ns").fill_null(0),
                           pl.coalesce("step_time_ns", "span_ns").alias("step_time_ns")))
    return ranks.with_columns((100 * pl.col("time_lost_ns") / pl.col("step_time_ns")).round(3).alias("time_lost_pct"))
