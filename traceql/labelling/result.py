"""The labelled result of one run or of several: per-rank summary, top slowed signatures, one row per
compute kernel, per-step costs; several runs' results merged into one."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from traceql.analyzers.cases import rank_cases
from traceql.labelling.sources import LabelSource, combine
from traceql.model import schema


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

    @property
    def source(self) -> LabelSource:
        """Where the labels came from (its sentence says so)."""
        return LabelSource.of(self.mode)

    def baseline_kinds(self) -> dict[str, int]:
        """How many compute kernels got each kind of baseline (twin, key-median, estimate, none)."""
        if self.kernels.is_empty():
            return {}
        return dict(self.kernels.group_by("baseline_kind").len().sort("baseline_kind").iter_rows())

    def reference_kinds(self) -> dict[str, dict[str, int]]:
        """Per reference kind (twin, clean, borrowed, corrected, contaminated, none): the compute kernels judged
        on it and the cases among them."""
        if self.kernels.is_empty():
            return {}
        counts = self.kernels.group_by("reference_kind").agg(
            pl.len().alias("kernels"), pl.col("is_slowdown").sum().alias("cases")).sort("reference_kind")
        return {kind: {"kernels": int(n), "cases": int(c)} for kind, n, c in counts.iter_rows()}

    def cases(self) -> int:
        """How many compute kernels are slowdown cases."""
        return int(self.kernels["is_slowdown"].sum()) if self.kernels.height else 0

    def time_lost_ns(self) -> int:
        """The GPU time the cases added, over all ranks."""
        return int(self.ranks["time_lost_ns"].sum()) if self.ranks.height else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "baseline_kinds": self.baseline_kinds(),
            "reference_kinds": self.reference_kinds(),
            "baseline_match_rate": None if self.match_rate is None else round(self.match_rate, 4),
            "metrics_match_rate": None if self.metrics_match_rate is None else round(self.metrics_match_rate, 4),
            "ranks": self.ranks.to_dicts(),
            "top_signatures": self.top_signatures.to_dicts(),
            "steps": self.steps.to_dicts(),
            "totals": {
                "compute_kernels": self.kernels.height,
                "cases": self.cases(),
                "time_lost_ns": self.time_lost_ns(),
            },
            "notes": self.notes,
        }


def empty_result(ranks: pl.DataFrame, note: str) -> DetectResult:
    """The result of a run with nothing to label: its ranks with zeros, no kernels."""
    zeros = [pl.lit(0 if t == pl.Int64 else None, dtype=t).alias(c) for c, t in schema.RANK_SUMMARY.items()]
    return DetectResult(ranks=ranks.select("run_id", "rank", *zeros),
                        top_signatures=schema.empty(schema.TOP_SIGNATURES), kernels=schema.empty(schema.CASES),
                        mode=LabelSource.NONE.mode, notes=[note])


def rank_summary(breakdown: pl.DataFrame, labelled: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """The breakdown per rank, its cases and time lost, and that as a share of its normal steps' GPU time
    (of the capture span when the trace has no steps)."""
    step_time = steps.group_by("run_id", "rank").agg(pl.col("gpu_ns").sum().alias("step_time_ns"))
    ranks = (breakdown.join(rank_cases(labelled), on=["run_id", "rank"], how="left", maintain_order="left")
             .join(step_time, on=["run_id", "rank"], how="left", maintain_order="left")
             .with_columns(pl.col("compute_kernels", "cases", "time_lost_ns").fill_null(0),
                           pl.coalesce("step_time_ns", "span_ns").alias("step_time_ns")))
    return ranks.with_columns((100 * pl.col("time_lost_ns") / pl.col("step_time_ns")).round(3).alias("time_lost_pct"))


def _renamed(result: DetectResult, used: set[str]) -> DetectResult:
    """A run whose run id an earlier run has already (two ``x.sqlite`` from two folders) becomes ``x#2``."""
    names: dict[str, str] = {}
    for run_id in result.ranks["run_id"].unique(maintain_order=True).to_list():
        name, n = run_id, 2
        while name in used:
            name, n = f"{run_id}#{n}", n + 1
        used.add(name)
        names[run_id] = name
    if all(k == v for k, v in names.items()):
        return result
    frames = [df.with_columns(pl.col("run_id").replace(names)) if "run_id" in df.columns else df
              for df in (result.ranks, result.top_signatures, result.kernels, result.steps)]
    return DetectResult(ranks=frames[0], top_signatures=frames[1], kernels=frames[2], mode=result.mode,
                        match_rate=result.match_rate, notes=result.notes,
                        metrics_match_rate=result.metrics_match_rate, steps=frames[3])


def _weighted(rates: list[tuple[float | None, int]]) -> float | None:
    known = [(r, n) for r, n in rates if r is not None]
    weight = sum(n for _, n in known)
    return sum(r * n for r, n in known) / weight if weight else None


def merge(results: list[DetectResult], *, top: int = 10) -> DetectResult:
    """One result from the runs' results, in the order given: ranks, steps and kernels one after another,
    the ``top`` slowed signatures of them all, notes once each. The baseline match rate is weighted by each
    run's compute kernels; the Nsight Compute match rate (a share of the profiled launches, which every run
    is matched with) is their mean."""
    if len(results) == 1:
        return results[0]
    used: set[str] = set()
    results = [_renamed(r, used) for r in results]
    tops = pl.concat([r.top_signatures for r in results], how="diagonal_relaxed")
    tops = tops.sort(["time_lost_ns", "run_id", "signature"], descending=[True, False, False]).head(top)
    metrics = [r.metrics_match_rate for r in results if r.metrics_match_rate is not None]
    notes = list(dict.fromkeys(n for r in results for n in r.notes))
    return DetectResult(
        ranks=pl.concat([r.ranks for r in results], how="diagonal_relaxed"),
        top_signatures=tops,
        kernels=pl.concat([r.kernels for r in results], how="diagonal_relaxed"),
        mode=combine([r.mode for r in results]),
        match_rate=_weighted([(r.match_rate, r.kernels.height) for r in results]),
        notes=notes,
        metrics_match_rate=sum(metrics) / len(metrics) if metrics else None,
        steps=pl.concat([r.steps for r in results], how="diagonal_relaxed"),
    )
