"""What each cause costs in step time, every run of a request replayed (``replayed``), each on its own."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import polars as pl

from traceql.analyzers import replay
from traceql.analyzers.replay.activities import activities, on_clock
from traceql.analyzers.replay.graph import DISORDER_NS
from traceql.analyzers.step_breakdown import cause_times, idle_share
from traceql.labelling.inputs import run_untraced
from traceql.labelling.request import Request
from traceql.verdicts.bounds import serial_as_run
from traceql.verdicts.intervals import step_bounds
from traceql.verdicts.measured import RunClass, classify, profiler_of, sentence
from traceql.verdicts.ranks import Facts, RanksResult, ranked_run
from traceql.verdicts.rebucketing import Rebucketing, rebucketing
from traceql.verdicts.replayed import RunVerdict, replayed, verdict

__all__ = ["RunVerdict", "WhatIfResult", "what_if"]


@dataclass
class WhatIfResult:
    """Per step of each run (``steps``: ``analyzers.replay.STEPS``), per run a :class:`RunVerdict`, and how the
    replay was made (``graph``: edges recorded in the trace and inferred, activities nothing explained)."""

    steps: pl.DataFrame
    runs: list[RunVerdict]
    graph: dict[str, int]
    notes: list[str] = field(default_factory=list)
    measured: str | None = None  # how far such answers were off on real runs of the counterfactuals

    def to_dict(self) -> dict[str, Any]:
        return {"steps": self.steps.to_dicts(), "runs": [r.to_dict() for r in self.runs], "graph": self.graph,
                "notes": self.notes, "measured": self.measured}


def what_if(req: Request, *, bucket_cap: float | None = None, gradients: Path | None = None) -> WhatIfResult:
    """Every run of ``req`` replayed, each on its own (its labels as `detect` makes them); with ``bucket_cap``
    (MB), each step also with its gradients in DDP buckets of that cap (``verdicts.rebucketing``: the
    model's gradient sizes from the run folder or ``gradients``)."""
    baseline = req.read_baseline()
    frames, runs, notes, classes = [], [], req.notes(), []
    graph = {"activities": 0, "recorded": 0, "inferred": 0, "unexplained": 0, "forced": 0, "disordered": 0}
    split = req.runs()
    caps = [rebucketing(paths, bucket_cap, gradients) for paths in split] if bucket_cap is not None else []
    for i, paths in enumerate(split):
        found = run_untraced(paths)
        ranked, facts, timeline, labelled = ranked_run(req, paths, baseline, found[1].untraced_ms /
                                                       found[1].traced_ms if found else None,
                                                       by_rank=False if caps else None)
        notes += ranked.notes
        cls = run_class(facts, ranked)
        done = ranked.replayed
        if done is None and timeline is not None and labelled is not None and not ranked.unaligned:
            done = replayed(timeline, labelled)  # a run without kernels: what it has
        if done is None:  # a run whose ranks' clocks disagree has no one axis to replay it on: nothing replayed
            done = replay.WhatIf(pl.DataFrame(schema=replay.STEPS), 0, 0, 0, 0, 0)
        times = cause_times(ranked.steps)
        steps = serial_as_run(done.steps, times)
        if caps and timeline is not None:  # a run is read whole where it is re-bucketed
            steps = _rebucketed(timeline, steps, caps[i])
        steps = step_bounds(steps, cls)
        frames.append(steps)
        for key in graph:
            graph[key] += getattr(done, key)
        run_ids = facts.ranks["run_id"].unique(maintain_order=True).to_list()
        if done.disordered:
            notes.append(f"{', '.join(run_ids)}: {done.disordered:,} GPU activities began more than "
                         f"{DISORDER_NS // 1000} us before the one before them on their stream ended; a stream runs "
                         "in order, so the trace is broken or was edited, and the replay's figures may be wrong")
        for run_id in run_ids:
            mine = facts.ranks.filter(pl.col("run_id") == run_id)
            runs.append(verdict(run_id, steps.filter(pl.col("run_id") == run_id), mine.height,
                                run_id in facts.talking, cls, clocks_agree=run_id not in ranked.unaligned,
                                late=ranked.late, times=times))
            if runs[-1].step_ns is not None:  # a figure to bound
                classes.append(cls)
            if caps and runs[-1].step_ns is not None:
                runs[-1].lines.append(_cap_line(steps.filter(pl.col("run_id") == run_id), caps[i], runs[-1]))
            if run_id not in facts.active:
                runs[-1].lines = ["no GPU activity to replay (a run on CPU?)"]
    steps = pl.concat(frames) if frames else step_bounds(pl.DataFrame(schema=replay.STEPS), _NONE)
    said = list(dict.fromkeys(s for s in (sentence(c, bool(caps)) for c in classes) if s))
    return WhatIfResult(steps, runs, graph, list(dict.fromkeys(notes)), " ".join(said) or None)


_NONE = RunClass("none", None, "no run")


def run_class(facts: Facts, ranked: RanksResult) -> RunClass:
    """What the validation counts a run as (``measured.classify``): its GPUs, how idle they sat (``ranked``:
    ``ranks.run_steps``), its collectives, its ranks and its profiler (``facts``)."""
    return classify(list(facts.gpus), idle_share(ranked.steps), facts.collectives,
                    facts.ranks.select("run_id", "rank").unique().height, profiler_of(facts.paths))


def _rebucketed(timeline: Any, steps: pl.DataFrame, cap: Rebucketing) -> pl.DataFrame:
    """``steps`` with ``bucket_cap_ns``: each step replayed, moved as its gradients in ``cap``'s buckets move it."""
    ops = on_clock(activities(timeline.kernels, timeline.memops, timeline.ranks))
    cost = steps.select("run_id", "step", (pl.col("replayed_ns") - pl.col("without_contention_ns")).clip(0)
                        .alias("contention_ns"))
    shift = replay.bucket_shifts(ops, cap.old, cap.new, waits=timeline.waits, contention=cost)
    return (steps.drop("bucket_cap_ns").join(shift, on=["run_id", "step"], how="left")
            .with_columns((pl.col("replayed_ns") + pl.col("shift_ns")).alias("bucket_cap_ns"))
            .select(steps.columns))


def _cap_line(steps: pl.DataFrame, cap: Rebucketing, run: RunVerdict) -> str:
    """The verdict's line on another bucket cap."""
    judged = steps.filter(~pl.col("first") & pl.col("bucket_cap_ns").is_not_null())
    buckets = f"{len(cap.new)} bucket{'s' if len(cap.new) > 1 else ''}, not {len(cap.old)}"
    if judged.is_empty():
        return (f"at {cap.cap_mb:g} MB buckets: no step to price (its steps do not reduce the {len(cap.old)} "
                "gradient all-reduces of its own buckets)")
    step = float(cast(float, judged["bucket_cap_ns"].median()))
    change = float(cast(float, (judged["bucket_cap_ns"] - judged["replayed_ns"]).median()))
    bounds = run.intervals.get("bucket_cap_ns")
    err = f", {bounds[0] / 1e6:,.1f} to {bounds[1] / 1e6:,.1f} ms" if bounds else ""
    return f"at {cap.cap_mb:g} MB buckets ({buckets}): {step / 1e6:,.1f} ms a step ({change / 1e6:+,.2f} ms{err})"
