"""`traceql diff`: two runs of the same model compared: step time, per-rank breakdown, labels, and each
compute kernel of AFTER paired with its counterpart in BEFORE by step alignment (``traceql.analyzers.diff``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import polars as pl

from traceql.analyzers.diff import (
    change_pct,
    kernel_changes,
    new_kernels,
    pair_kernels,
    per_step,
    rank_changes,
    removed_kernels,
    run_step_times,
    run_totals,
    span_time,
    step_figures,
    verdict,
)
from traceql.analyzers.step_breakdown import step_breakdown
from traceql.errors import InputError, OptionError
from traceql.labelling.inputs import Timeline, read_timeline
from traceql.labelling.label import label
from traceql.labelling.options import NO_CHANGE_PCT
from traceql.labelling.result import DetectResult
from traceql.model.step_marker import described

__all__ = ["DiffResult", "diff"]

SIDES = ("before", "after")
# AFTER's kernel time that pairs with BEFORE's kernels, below which the runs are likely not of one model and shapes
FEW_PAIRED = 0.5


@dataclass
class DiffResult:
    """What changed from BEFORE to AFTER. ``runs``: each side's path, label mode, ranks, steps and totals;
    ``step_time``: each side's mean and 90th-percentile step time and their changes; ``ranks``: one row per
    rank number (means per normal step);
    ``kernels`` (paired, per key, by |delta|), ``new``, ``removed``: per key; ``pairs``: every compute kernel
    of AFTER's normal steps with the BEFORE kernel it aligns with."""

    runs: dict[str, dict[str, Any]]
    step_time: dict[str, Any]
    ranks: pl.DataFrame
    kernels: pl.DataFrame
    new: pl.DataFrame
    removed: pl.DataFrame
    pairs: pl.DataFrame
    verdict: str
    tolerance_pct: float = NO_CHANGE_PCT
    notes: list[str] = field(default_factory=list)

    def fails(self, above: float) -> bool:
        """Whether the mean step time, or its 90th percentile, regressed by more than ``above`` percent
        (`--fail-above`).

        Args:
            above: the percent of BEFORE's step time that AFTER's may exceed it by; below 0 asks AFTER to be
                that much faster.

        Returns:
            True when either change is known and above ``above``.
        """
        if self.verdict == "unknown":
            return False
        changes = [self.step_time[k] for k in ("change_pct", "p90_change_pct")]
        return any(c is not None and c > above for c in changes)

    def kernel_totals(self) -> dict[str, float | int]:
        """The paired kernels' before and after time, the new kernels' and the removed ones' (ns)."""
        k = self.kernels
        return {"paired": int(k["instances"].sum()), "paired_before_ns": float(k["before_ns"].sum()),
                "paired_after_ns": float(k["after_ns"].sum()), "new": int(self.new["instances"].sum()),
                "new_ns": float(self.new["after_ns"].sum()), "removed": int(self.removed["instances"].sum()),
                "removed_ns": float(self.removed["before_ns"].sum())}

    def to_dict(self, top: int | None = None) -> dict[str, Any]:
        """The JSON form; ``top`` limits the kernel, new and removed lists (None: all).

        Args:
            top: at most this many rows of the kernel, new and removed lists (None or 0: all).

        Returns:
            ``before``, ``after``, ``step_time``, ``ranks``, ``kernels``, ``kernel_totals``, ``new``, ``removed``,
            ``verdict`` and ``notes``, as JSON values.
        """
        return {**self.runs, "step_time": self.step_time, "ranks": self.ranks.to_dicts(),
                "kernels": self.kernels.head(top).to_dicts() if top else self.kernels.to_dicts(),
                "kernel_totals": self.kernel_totals(),
                "new": self.new.head(top).to_dicts() if top else self.new.to_dicts(),
                "removed": self.removed.head(top).to_dicts() if top else self.removed.to_dicts(),
                "verdict": {"verdict": self.verdict, "change_pct": self.step_time["change_pct"],
                            "p90_change_pct": self.step_time["p90_change_pct"], "tolerance_pct": self.tolerance_pct},
                "notes": self.notes}


def _side(path: Path, labelled: DetectResult) -> dict[str, Any]:
    return {"path": str(path), "run_id": labelled.ranks["run_id"][0] if labelled.ranks.height else None,
            "mode": labelled.mode, "ranks": labelled.ranks.height,
            "steps": labelled.steps.select("run_id", "step").unique().height,  # a step once, whatever its ranks
            **run_totals(labelled.ranks)}


def _renumbered(timeline: Timeline, mapping: dict[int, int]) -> Timeline:
    """``timeline`` with its ranks renumbered as ``mapping`` says, in every relation that names them."""
    changed: dict[str, Any] = {}
    for name, value in vars(timeline).items():
        if isinstance(value, pl.DataFrame) and "rank" in value.columns:
            dtype = value.schema["rank"]
            changed[name] = value.with_columns(pl.col("rank").replace(mapping).cast(dtype))
    return replace(timeline, **changed)


def _paired_ranks(timelines: dict[str, Timeline]) -> tuple[dict[str, Timeline], list[str]]:
    """Two sides whose ranks share no number but are as many (one rank of a job each, say HTA's trace_diff:
    rank 3 against rank 1): AFTER's renumbered as BEFORE's, in order, with a note; others as they are."""
    ranks = {side: sorted(set(timelines[side].ranks["rank"].to_list())) for side in SIDES}
    if set(ranks["before"]) & set(ranks["after"]) or len(ranks["before"]) != len(ranks["after"]):
        return timelines, []
    mapping = dict(zip(ranks["after"], ranks["before"], strict=True))
    said = ", ".join(f"{b} with {a}" for a, b in mapping.items())
    note = (f"before holds rank(s) {', '.join(map(str, ranks['before']))}, after rank(s) "
            f"{', '.join(map(str, ranks['after']))}: compared in order ({said}); the ranks below are before's")
    return {**timelines, "after": _renumbered(timelines["after"], mapping)}, [note]


def _one_run(path: Path) -> Timeline:
    """The timeline of one run (a file, or a folder of one run's per-rank files)."""
    timeline = read_timeline([path])
    runs = timeline.ranks["run_id"].unique()
    if runs.len() > 1:
        raise InputError(f"holds {runs.len()} runs ({', '.join(sorted(runs))}): diff compares one run with "
                         "another; give one run on each side", path=str(path))
    return timeline


def diff(before: str | Path, after: str | Path, *, tolerance: float = NO_CHANGE_PCT) -> DiffResult:
    """Compare run ``after`` with run ``before`` (each a trace file or folder of one run).

    Each run is labelled as ``detect`` labels it without a baseline (its isolated steps if it has some, else
    the detector). Step time is the run's: each normal step's longest rank GPU time (``run_step_times``), its
    mean and 90th percentile over the normal steps (the median rank span when a run has no steps); the verdict
    is ``regressed`` when either grew by more than ``tolerance`` %. The per-rank figures are means per normal
    step. AFTER's compute kernels are paired with BEFORE's by step alignment, rank by rank
    (``traceql.analyzers.diff``).

    Args:
        before: the earlier run: a trace file or a folder of one run's traces.
        after: the later run, compared with ``before``.
        tolerance: the ± percent within which a step time change is ``no change`` (finite, 0 or more).

    Returns:
        Each side's run and step time, their changes and the verdict, the per-rank changes, the paired, new and
        removed kernels, every pair, and notes.

    Raises:
        OptionError: for a ``tolerance`` below 0 or not finite.
        InputError: for a side that holds more than one run, or cannot be read.
    """
    if not 0 <= tolerance < math.inf:
        raise OptionError(f"--tolerance must be a finite 0 or more percent, got {tolerance}")
    paths = {"before": Path(before), "after": Path(after)}
    timelines, renumbered = _paired_ranks({side: _one_run(paths[side]) for side in SIDES})
    labelled = {side: label(timelines[side]) for side in SIDES}
    notes = [f"{side}: {text}" for side in SIDES for text in labelled[side].notes] + renumbered
    by_span = any(labelled[side].steps.is_empty() for side in SIDES)
    if by_span:
        notes.append(f"a run has no normal steps ({described()}): the median rank span is "
                     "shown, but it times the capture, not the work in it, so the verdict is unknown; kernels "
                     "are not paired")
        figures = {side: {"mean_ns": span_time(labelled[side].ranks), "p90_ns": None, "steps": 0,
                          "slowest_step": None, "slowest_ns": None} for side in SIDES}
        ranks_of = {side: labelled[side].ranks for side in SIDES}
    else:
        figures = {side: step_figures(run_step_times(timelines[side].steps)) for side in SIDES}
        ranks_of = {side: per_step(step_breakdown(timelines[side].kernels, timelines[side].memops,
                                                  timelines[side].steps), labelled[side].steps) for side in SIDES}
    times = {side: figures[side]["mean_ns"] for side in SIDES}
    change = change_pct(times["before"], times["after"])
    tail = change_pct(figures["before"]["p90_ns"], figures["after"]["p90_ns"])
    kernels = {side: timelines[side].kernels for side in SIDES}
    pairs, canonical = pair_kernels(kernels["before"], kernels["after"] if not by_span else kernels["after"].head(0))
    ranks = {side: set(labelled[side].ranks["rank"]) for side in SIDES}
    for side, other, what in (("before", "after", "not compared"), ("after", "before", "their kernels are new")):
        if only := sorted(ranks[side] - ranks[other]):
            notes.append(f"rank(s) {', '.join(map(str, only))} only in {side}: {what}")
    result = DiffResult(
        runs={side: _side(paths[side], labelled[side]) for side in SIDES},
        step_time={"before_ns": times["before"], "after_ns": times["after"],
                   "change_pct": None if change is None else round(change, 3),
                   "p90_before_ns": figures["before"]["p90_ns"], "p90_after_ns": figures["after"]["p90_ns"],
                   "p90_change_pct": None if tail is None else round(tail, 3),
                   "steps_before": figures["before"]["steps"], "steps_after": figures["after"]["steps"],
                   **{f"slowest_{k}_{side}": figures[side][f"slowest_{k}"] for side in SIDES for k in ("step", "ns")},
                   "basis": "span" if by_span else "step"},
        ranks=rank_changes(ranks_of["before"], ranks_of["after"]),
        kernels=kernel_changes(pairs), new=new_kernels(pairs),
        removed=removed_kernels(pairs, canonical, kernels["before"]),
        pairs=pairs, verdict="unknown" if by_span else verdict(change, tolerance, tail), tolerance_pct=tolerance,
        notes=notes)
    if not by_span:
        _warn_unlike(result)
    return result


def _warn_unlike(result: DiffResult) -> None:
    """A warning among the notes when little of AFTER's kernel time pairs with BEFORE's kernels: a step time
    compared between runs of different models or shapes says little."""
    totals = result.kernel_totals()
    after = totals["paired_after_ns"] + totals["new_ns"]
    share = totals["paired_after_ns"] / after if after else 1.0
    if share < FEW_PAIRED:
        result.notes.append(f"warning: only {100 * share:.1f} % of AFTER's kernel time pairs with BEFORE's "
                            "kernels: are they runs of one model and shapes? the step time change compares "
                            "unlike runs")
