"""Several runs given together: one `detect` result from the runs' own.

`detect` labels each run on its own (which input files form each run: ``traceql.sources.runs``); here their
results are put one after another, a run id that an earlier run already has renamed, the slowed signatures
re-cut and the match rates combined.
"""

from __future__ import annotations

import polars as pl

from traceql.labelling import DetectResult

MODES = ("baseline", "inrun", "detector")


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


def _mode(modes: list[str]) -> str:
    labelled = {m for m in modes if m != "none"}
    if not labelled:
        return "none"
    if len(labelled) == 1:
        return labelled.pop()
    return "baseline" if "baseline" in labelled else "inrun+detector"


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
        mode=_mode([r.mode for r in results]),
        match_rate=_weighted([(r.match_rate, r.kernels.height) for r in results]),
        notes=notes,
        metrics_match_rate=sum(metrics) / len(metrics) if metrics else None,
        steps=pl.concat([r.steps for r in results], how="diagonal_relaxed"),
    )
