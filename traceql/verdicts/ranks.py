"""Every normal step of every rank of a request's runs, labelled: the step breakdown, cases and time lost,
each rank's arrivals at the collectives and the stragglers they show (`ranks`; `profile buckets` reads the
all-reduce times from the arrivals)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple, cast

import polars as pl

from traceql.analyzers import replay
from traceql.analyzers.causes import CAUSES, HELD, ranking, step_list
from traceql.analyzers.collectives import operations
from traceql.analyzers.replay.activities import KEY, activities
from traceql.analyzers.step_breakdown import STEP_KEY, cause_times, step_breakdown
from traceql.analyzers.stragglers import MIN_COST_SHARE, arrivals, disagreeing, priced, stragglers
from traceql.labelling import memo
from traceql.labelling.inputs import Baseline, Timeline
from traceql.labelling.kept import Kept
from traceql.labelling.late import late_waits
from traceql.labelling.request import Request
from traceql.labelling.result import DetectResult
from traceql.sources.shards import large, shards
from traceql.verdicts import kept_replay
from traceql.verdicts.kept_replay import Way
from traceql.verdicts.pricing import (
    DETECT,
    aligned,
    clock_note,
    clocked_cases,
    clocked_comm,
    detect_way,
    ranks_options,
    ranks_tag,
    step_time,
    stored_cases,
    straggler_cases,
    unnamed,
)
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


@dataclass(frozen=True)
class Facts:
    """What a verdict says of a run beside its steps: its ranks (``run_id``, ``rank``), the names of the GPUs its
    kernels ran on, its collectives' operations, its trace files, its runs with communication (``talking``) and
    with GPU activity (``active``)."""

    ranks: pl.DataFrame
    gpus: list[str | None]
    collectives: set[str]
    paths: list[str]
    talking: set[str]
    active: set[str]


@dataclass(frozen=True)
class _Inputs:
    """What one run's steps, stragglers and causes are made of, from its timeline read whole or its activities
    stored a rank at a time: the step breakdown joined with its labels, the arrivals; what replays it (given the
    stragglers), finds the launches its GPUs waited for, and the stragglers' cases."""

    steps: pl.DataFrame
    arrived: pl.DataFrame
    replay: Callable[[pl.DataFrame], replay.WhatIf]
    late: Callable[[], pl.DataFrame]
    held: Callable[[pl.DataFrame], pl.DataFrame]


def _with_cases(breakdown: pl.DataFrame, labelled: DetectResult) -> pl.DataFrame:
    """The steps' breakdown with each step's cases and time lost (``labelled.steps``)."""
    return (breakdown.join(labelled.steps.select(*STEP_KEY, "cases", "time_lost_ns"), on=STEP_KEY, how="left")
            .with_columns(pl.col("cases", "time_lost_ns").fill_null(0)))


def _one_run(req: Request, paths: list[Path] | None, baseline: Baseline | None) -> RanksResult:
    return ranked_run(req, paths, baseline).result


class Ranked(NamedTuple):
    """One run ranked (:func:`ranked_run`), what a verdict says of it, and its timeline and labels where it was
    read whole (else None)."""

    result: RanksResult
    facts: Facts
    timeline: Timeline | None = None
    labelled: DetectResult | None = None


def ranked_run(req: Request, paths: list[Path] | None, baseline: Baseline | None, untraced: float | None = None,
               by_rank: bool | None = None) -> Ranked:
    """One run of ``req`` (``paths``) labelled and ranked (:func:`run_steps`; ``untraced``: its). A run of
    several rank files larger than ``shards.LARGE_BYTES`` (or any, ``by_rank``; none, ``by_rank=False``) is
    labelled a rank at a time and replayed from its stored activities (one rank's timeline in memory at once, as
    `detect` reads it); the figures are the same."""
    options = {"threshold": req.threshold, "single_trace": req.single_trace, "hta_compat": req.hta_compat,
               "untraced": untraced, "by_rank": by_rank}
    kept = memo.key("ranked", [*(paths or req.traces()), *(req.baseline or [])], options) if by_rank is not False \
        else None
    found = memo.load(kept)
    if isinstance(found, tuple) and len(found) == 2:
        return Ranked(*found)
    got = _ranked_run(req, paths, baseline, untraced, by_rank)
    if got.result.replayed is not None:  # else `whatif` reads its timeline again
        memo.save(kept, (got.result, got.facts), f"ranks: {', '.join(map(str, paths or req.traces()))}")
    return got


def _ranked_run(req: Request, paths: list[Path] | None, baseline: Baseline | None, untraced: float | None,
                by_rank: bool | None) -> Ranked:
    parts = large(paths) if by_rank is None else shards(paths) if by_rank else None
    if parts is not None and len(parts) > 1:
        got: list[tuple[RanksResult, Facts]] = []
        req.label_by_rank(parts, baseline, then=lambda res, kept: got.append(stored_steps(res, kept, untraced)))
        if got:  # none where the run has no compute kernel: read whole
            return Ranked(*got[0])
    timeline, labelled = req.label(paths, baseline)
    return Ranked(run_steps(timeline, labelled, untraced), facts_of(timeline), timeline, labelled)


def facts_of(timeline: Timeline) -> Facts:
    """:class:`Facts` of a timeline read whole."""
    kernels = timeline.kernels
    return Facts(timeline.ranks.select("run_id", "rank"), list(timeline.gpus),
                 operations(kernels), timeline.ranks["path"].cast(pl.String).to_list(),
                 set(kernels.filter(pl.col("kind") == "comm")["run_id"].unique().to_list()),
                 set(kernels["run_id"].unique().to_list()))


def clocks_disagree(timeline: Timeline) -> list[str]:
    """The runs of ``timeline`` whose ranks' clocks disagree (:func:`disagreeing`)."""
    return [run for run, _ in disagreeing(arrivals(timeline.kernels, timeline.ranks))]


def run_steps(timeline: Timeline, labelled: DetectResult, untraced: float | None = None) -> RanksResult:
    """One run's steps, stragglers and per-rank breakdown, from its timeline and its labels; the run replayed
    without each cause (its ranking: ``analyzers.causes``), unless its ranks' clocks disagree; ``untraced``:
    its untraced median step over its traced one, where known (the replay's untraced what-ifs)."""
    arrived = arrivals(timeline.kernels, timeline.ranks)
    how = _Inputs(_with_cases(step_breakdown(timeline.kernels, timeline.memops, timeline.steps), labelled), arrived,
                  lambda named: replayed(timeline, labelled, named, untraced),
                  lambda: late_waits(activities(timeline.kernels, timeline.memops, timeline.ranks), timeline.nvtx),
                  lambda named: straggler_cases(labelled.kernels, timeline.ranks, arrived, named))
    talking = set(timeline.kernels.filter(pl.col("kind") == "comm")["run_id"].unique().to_list())
    return _ranked(how, labelled, timeline.ranks["run_id"].unique(maintain_order=True).to_list(), talking,
                   replays=not timeline.kernels.is_empty())


def stored_steps(labelled: DetectResult, kept: Kept, untraced: float | None = None) -> tuple[RanksResult, Facts]:
    """:func:`run_steps` of a run labelled a rank at a time (``labelling.by_rank``'s ``then``), from its stored
    activities (``kept``), and :class:`Facts` of it."""
    lazy = kept.stored.scan()
    comm = clocked_comm(lazy)
    ranks = kept.ranks.with_columns(pl.lit(0, pl.Int64).alias("clock_offset_ns"))  # the activities are on_clock
    arrived = arrivals(comm, ranks)
    offsets = lazy.select("run_id", "rank", "clock_offset_ns").unique().collect()
    cases = stored_cases(labelled, ["run_id", "rank", "step", *KEY[2:], "duration_ns", "is_slowdown", "baseline_ns"])
    assert kept.breakdown is not None  # a run that stored its activities made its breakdown too

    def replayed_stored(named: pl.DataFrame) -> replay.WhatIf:  # and `detect`'s way, where it shares the windows
        marks = clocked_cases(cases, offsets.lazy()).drop("step")
        own = Way(ranks_tag(untraced), ranks_options(kept.waits, named, untraced), marks,
                  partial(aligned, unaligned=()))
        return kept_replay.replayed(kept, own, (DETECT, lambda: detect_way(kept, cases)))

    how = _Inputs(_with_cases(kept.breakdown, labelled), arrived, replayed_stored,
                  lambda: cast(pl.DataFrame, kept.late),  # made wherever the activities were stored
                  lambda named: straggler_cases(cases, offsets, arrived, named))
    talking = set(comm["run_id"].unique().to_list())
    run_ids = kept.ranks["run_id"].unique(maintain_order=True).to_list()
    active = set(lazy.filter(pl.col("kind").is_in(["compute", "comm"])).select("run_id").unique().collect()
                 ["run_id"].to_list())
    facts = Facts(kept.ranks, kept.gpus, kept.collectives, kept.paths, talking, active)
    return _ranked(how, labelled, run_ids, talking, replays=True), facts


def _ranked(how: _Inputs, labelled: DetectResult, run_ids: list[str], talking: set[str],
            replays: bool) -> RanksResult:
    """A run's steps, stragglers, causes and stragglers' cases from what they are made of (``how``)."""
    steps, arrived = how.steps, how.arrived
    notes, unaligned = list(labelled.notes), []
    for run, skew in disagreeing(arrived):
        notes.append(clock_note(run, skew))
        unaligned.append(run)
    named = stragglers(arrived.filter(~pl.col("run_id").is_in(unaligned)), step_time(steps))
    done = None
    if replays and not unaligned:  # what each cause cost its steps: the replay without it
        done = how.replay(named)
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
    late = None
    if done is not None:
        notes += _cheap_notes(cheap)
        done = replace(done, steps=unnamed(done.steps, cheap))
        late = how.late()
        causes = ranking(done.steps, set(done.steps["run_id"].to_list()) - talking, late, cause_times(steps))
    held = how.held(named)
    modes = dict.fromkeys(run_ids, labelled.mode)
    return RanksResult(steps, named, labelled.ranks, modes, notes, unaligned, arrived, done, causes, held, late)


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
