"""`traceql detect`: exact overlap, baselines and slowdown labels for every compute kernel of a trace."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from analyzers.baselines import isolated_baseline, match_rate
from analyzers.breakdown import rank_breakdown
from analyzers.compat import hta_view
from analyzers.detector import SlowdownDetector
from analyzers.features import FEATURES, feature_table
from analyzers.labels import (
    CASE_COLUMNS,
    CASE_SCHEMA,
    PAIRED_FACTOR,
    detector_labels,
    paired_labels,
    rank_cases,
    top_signatures,
    with_scores,
)
from analyzers.metrics import curated_columns, join_metrics
from analyzers.overlap import comm_overlap
from traceql import inputs
from traceql.errors import InputError, TraceqlError
from traceql.sources.ncu import read_ncu
from traceql.trace import Trace, read_trace

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

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "baseline_match_rate": None if self.match_rate is None else round(self.match_rate, 4),
            "metrics_match_rate": None if self.metrics_match_rate is None else round(self.metrics_match_rate, 4),
            "ranks": self.ranks.to_dicts(),
            "top_signatures": self.top_signatures.to_dicts(),
            "totals": {
                "compute_kernels": self.kernels.height,
                "cases": int(self.kernels["is_slowdown"].sum()),
                "time_lost_ns": int(self.ranks["time_lost_ns"].sum()) if self.ranks.height else 0,
            },
            "notes": self.notes,
        }


def _baseline(paths: Sequence[str | Path], notes: list[str]) -> pl.DataFrame:
    with read_trace(list(paths)) as iso:
        kernels = iso.kernels
    comm = kernels.filter(pl.col("kind") == "comm").height
    if comm:
        notes.append(f"warning: the baseline has {comm} communication kernels: it is not an isolated run "
                     "(record it on one GPU without DDP/NCCL)")
    return isolated_baseline(kernels)


def _metrics(paths: Sequence[str | Path]) -> pl.DataFrame:
    files = inputs.resolve(list(paths))
    for f in files:
        if f.fmt != "ncu-csv":
            raise InputError("not an Nsight Compute CSV (give ncu --csv --page raw|details output)", path=str(f.path))
    return pl.concat([read_ncu(f.path).metrics for f in files], how="diagonal_relaxed")


RANK_COLUMNS = {"span_ns": pl.Int64, "busy_ns": pl.Int64, "idle_ns": pl.Int64, "compute_ns": pl.Int64,
                "comm_ns": pl.Int64, "memory_ns": pl.Int64, "non_compute_ns": pl.Int64,
                "comm_compute_overlap_ns": pl.Int64, "comm_comp_overlap_pct": pl.Float64,
                "compute_kernels": pl.Int64, "cases": pl.Int64, "time_lost_ns": pl.Int64}


def _no_kernels(trace: Trace, notes: list[str]) -> DetectResult:
    """A trace with no compute kernels: an ncu-only input is an error, a CPU run is an empty result."""
    if not trace.relation("kernel_metrics").is_empty():
        raise InputError("Nsight Compute metrics are not a timeline: give them as detect TRACE --metrics PATH",
                         path=str(trace.paths[0]))
    notes.append("no GPU kernels in this trace (a run on CPU?): nothing to label")
    zeros = [pl.lit(0 if t == pl.Int64 else None, dtype=t).alias(c) for c, t in RANK_COLUMNS.items()]
    ranks = trace.ranks.select("run_id", "rank", *zeros)
    empty = pl.DataFrame(schema=CASE_SCHEMA)
    return DetectResult(ranks=ranks, top_signatures=top_signatures(empty, 1), kernels=empty, mode="none",
                        notes=notes)


def detect(
    paths: str | Path | Sequence[str | Path] | None = None,
    *,
    baseline: Sequence[str | Path] | None = None,
    threshold: float = PAIRED_FACTOR,
    top: int = 10,
    detector: SlowdownDetector | None = None,
    hta_compat: bool = False,
    metrics: Sequence[str | Path] | None = None,
) -> DetectResult:
    """Label every compute kernel of a trace as slowed by communication or not.

    With ``baseline`` (isolated runs of the same model and shapes), labels follow the paired definition:
    overlapped and longer than ``threshold`` × the signature's isolated median. Without it, a
    :class:`SlowdownDetector` labels from the trace alone. With neither paths nor baseline, the embedded
    example trace and its isolated baseline. ``hta_compat`` computes the per-rank breakdown as Holistic
    Trace Analysis 0.5.0 does (``analyzers.compat``); labels stay exact. ``metrics`` (ncu CSVs of the same
    workload) adds the ``ncu_*`` metrics to every compute kernel (``analyzers.metrics``).
    """
    if paths is None or (not isinstance(paths, (str, Path)) and len(paths) == 0):
        paths = None
        if baseline is None:
            baseline = [inputs.DEFAULT_BASELINE]
    if not threshold > 1.0:
        raise TraceqlError(f"--threshold must be above 1.0 (a slowdown ratio), got {threshold}")
    notes: list[str] = []
    ncu = _metrics(metrics) if metrics else None
    with read_trace(paths) as trace:
        kernels, memops, nvtx = trace.kernels, trace.memcpy, trace.nvtx
        if kernels.filter(pl.col("kind") == "compute").is_empty():
            return _no_kernels(trace, notes)
    if kernels.filter(pl.col("kind") == "comm").is_empty():
        notes.append("no communication kernels in this trace: nothing overlaps, so no slowdown cases")
    overlap = comm_overlap(kernels)
    features = feature_table(overlap)
    model = detector if detector is not None else SlowdownDetector(threshold=threshold)
    model.fit(features.select(FEATURES).to_numpy()) if features.height else None
    scored = with_scores(features, model) if features.height else features.with_columns(pl.lit(None).alias("score"))
    rate = None
    if baseline:
        base = _baseline(baseline, notes)
        rate = match_rate(scored, base)
        if rate < LOW_MATCH:
            notes.append(f"warning: only {rate:.1%} of compute kernels match a baseline signature: "
                         "was the baseline run with the same model and shapes?")
        labelled = paired_labels(scored, base, threshold)
    else:
        labelled = detector_labels(scored, model) if scored.height else scored
    out_columns = CASE_COLUMNS
    metrics_rate = None
    if ncu is not None:
        labelled, metrics_rate = join_metrics(labelled, ncu)
        out_columns = CASE_COLUMNS + curated_columns(ncu) + ["ncu_match"]
        if metrics_rate < LOW_METRICS_MATCH:
            notes.append(f"warning: only {metrics_rate:.1%} of the profiled ncu launches match a kernel of the trace "
                         "(same kernel name, grid, block and launch order): is it a profile of the same workload?")
    view = hta_view(kernels, memops, nvtx) if hta_compat else (kernels, memops)
    ranks = rank_breakdown(*view).join(rank_cases(labelled), on=["run_id", "rank"], how="left", maintain_order="left")
    ranks = ranks.with_columns(pl.col("compute_kernels", "cases", "time_lost_ns").fill_null(0))
    return DetectResult(
        ranks=ranks,
        top_signatures=top_signatures(labelled, top),
        kernels=labelled.select(out_columns),
        mode="baseline" if baseline else "detector",
        match_rate=rate,
        notes=notes,
        metrics_match_rate=metrics_rate,
    )
