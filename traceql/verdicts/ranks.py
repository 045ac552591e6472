"""Every normal step of every rank of a request's runs, labelled: the step breakdown, cases and time lost,
each rank's arrivals at the collectives and the stragglers they show (`ranks`; `profile buckets` reads the
all-reduce times from the arrivals)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import polars as pl

from traceql.analyzers import replay
from traceql.analyzers.causes import CAUSES, HELD, ranking, step_list
from traceql.analyzers.replay.activities import activities
from traceql.analyzers.step_breakdown import STEP_KEY, cause_times, step_breakdown
from traceql.analyzers.stragglers import MIN_COST_SHARE, arrivals, disagreeing, priced, stragglers
from traceql.labelling.inputs import Baseline, Timeline
from traceql.labelling.late import late_waits
from traceql.labelling.request import Request
from traceql.labelling.result import DetectResult
from traceql.verdicts.pricing import clock_note, straggler_cases, unnamed
from traceql.verdicts.replayed import replayed


@dataclass
class RanksResult:
    """Per step and rank: the breakdown, cases and time lost (``steps``); the stragglers, with what each cost its
    step (``cost_ns``: the step's time replayed, ``step_ns``, less its time without the straggler,
    ``without_ns``) and the evidence (``held_ns`` ...: ``analyzers.stragglers``); the whole capture per rank
    (``ranks``: `detect`'s breakdown); the arrivals they come from (``arrivals``)."""

    steps: pl.DataFrame
    stragglers: pl.DataFrame
    ranks: pl.DataFrame
    modes: dict[str, str]
    notes: list[str] = field(default_factory=list)
    unaligned: list[str] = field(default_factory=list)  # runs whose ranks' clocks disagree: no stragglers
    arrivals: pl.DataFrame | None = None  # every rank's arrival at every collective (analyzers.stragglers)
    replayed: replay.WhatIf | None = None  # the run replayed without each cause (None: its clocks disagree)
    causes: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=CAUSES))  # analyzers.causes
    held: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=HELD))  # the stragglers' own cases
    late: pl.DataFrame | None = None  # the launches its GPUs waited for, by CPU section (``labelling.late``)


    def to_dict(self) -> dict[str, Any]:
        return {"modes": self.modes, "causes": self.causes.to_dicts(), "straggler_cases": self.held.to_dicts(),
                "stragglers": self.stragglers.to_dicts(),
                "unaligned_runs": self.unaligned,
                "steps": self.steps.to_dicts(), "ranks": self.ranks.to_dicts(), "notes": self.notes}


def _step_time(steps: pl.DataFrame) -> pl.DataFrame:
    """Per (run_id, step): the median over ranks of the step's GPU time, what a straggler's wait is judged by."""
    return steps.group_by("run_id", "step").agg(pl.col("gpu_ns").median().cast(pl.Int64).alias("step_ns"))


def _one_run(req: Request, paths: list[Path] | None, baseline: Baseline | None) -> RanksResult:
    return run_steps(*req.label(paths, baseline))


def clocks_disagree(timeline: Timeline) -> list[str]:
    """The runs of ``timeline`` whose ranks' clocks disagree (:func:`disagreeing`)."""
    return [run for run, _ in disagreeing(arrivals(timeline.kernels, timeline.ranks))]


def run_steps(timeline: Timeline, labelled: DetectResult, untraced: float | None = None) -> RanksResult:
    """One run's steps, stragglers and per-rank breakdown, from its timeline and its labels; the run replayed
    without each cause (its ranking: ``analyzers.causes``), unless its ranks' clocks disagree; ``untraced``:
    its untraced median step over its traced one, where known (the replay's untraced what-ifs)."""
    steps = (step_breakdown(timeline.kernels, timeline.memops, timeline.steps)
             .join(labelled.steps.select(*STEP_KEY, "cases", "time_lost_ns"), on=STEP_KEY, how="left")
             .with_columns(pl.col("cases", "time_lost_ns").fill_null(0)))
    arrived = arrivals(timeline.kernels, timeline.ranks)
    notes, unaligned = list(labelled.notes), []
    for run, skew in disagreeing(arrived):
        notes.append(clock_note(run, skew))
        unaligned.append(run)
    named = stragglers(arrived.filter(~pl.col("run_id").is_in(unaligned)), _step_time(steps))
    done = None
    if not timeline.kernels.is_empty() and not unaligned:  # what each cause cost its steps: the replay without it
        done = replayed(timeline, labelled, named, untraced)
        named = named.join(done.steps.select("run_id", "step", pl.col("replayed_ns").alias("step_ns"),
                                             pl.col("without_straggler_ns").alias("without_ns")),
                           on=["run_id", "step"], how="left")
    else:
        named = named.with_columns(pl.lit(None, pl.Int64).alias("step_ns"), pl.lit(None, pl.Int64).alias("without_ns"))
    named = named.with_columns((pl.col("step_ns") - pl.col("without_ns")).alias("cost_ns")).select(
        "run_id", "rank", "step", "cost_ns", "step_ns", "without_ns", "held_ns", "waiting_ranks", "held_share",
        "last_at", "collectives")
    named, cheap = priced(named)
    causes = pl.DataFrame(schema=CAUSES)
    if done is not None:
        notes += _cheap_notes(cheap)
        done = replace(done, steps=unnamed(done.steps, cheap))
        talking = set(timeline.kernels.filter(pl.col("kind") == "comm")["run_id"].unique().to_list())
        late = late_waits(activities(timeline.kernels, timeline.memops, timeline.ranks), timeline.nvtx)
        causes = ranking(done.steps, set(done.steps["run_id"].to_list()) - talking, late, cause_times(steps))
    held = straggler_cases(labelled.kernels, timeline.ranks, arrived, named)
    modes = {run: labelled.mode for run in timeline.ranks["run_id"].unique(maintain_order=True)}
    return RanksResult(steps, named, labelled.ranks, modes, notes, unaligned, arrived, done, causes, held,
                       late if done is not None else None)


def _cheap_notes(cheap: pl.DataFrame) -> list[str]:
    """One note per run on the ranks that held the others yet cost their steps little."""
    out = []
    for (run_id,), part in cheap.group_by("run_id", maintain_order=True):
        most = cast(int, part["cost_ns"].max())  # an Int64 column: whole ns
        out.append(f"note: {run_id}: ranks held the others in {step_list(part['step'].to_list())} but cost them "
                   f"{most / 1e6:,.1f} ms at most (under {MIN_COST_SHARE:.0%} of a step, by the "
                   "replay): no straggler named")
    return out


def rank_steps(req: Request) -> RanksResult:
    """The steps, stragglers and per-rank breakdown of every run of ``req``, each run taken on its own."""
    baseline = req.read_baseline()
    parts = [_one_run(req, run, baseline) for run in req.runs()]
    return RanksResult(
        steps=pl.concat([p.steps for p in parts]).sort(STEP_KEY),
        stragglers=pl.concat([p.stragglers for p in parts]).sort("run_id", "step", "rank"),
        ranks=pl.concat([p.ranks for p in parts], how="diagonal_relaxed").sort("run_id", "rank"),
        modes={k: v for p in parts for k, v in p.modes.items()},
        notes=list(dict.fromkeys([*req.notes(), *(n for p in parts for n in p.notes)])),
        unaligned=[u for p in parts for u in p.unaligned],
        arrivals=pl.concat([p.arrivals for p in parts if p.arrivals is not None]),
        causes=pl.concat([p.causes for p in parts]), held=pl.concat([p.held for p in parts]),
        late=pl.concat(lates) if (lates := [p.late for p in parts if p.late is not None]) else None)
