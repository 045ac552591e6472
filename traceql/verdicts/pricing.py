"""What a run's causes cost, from one replay of its labelled activities: the ranking every verdict leads with
(``analyzers.causes``), the stragglers priced as `ranks` prices them, the slowdown cases that were a straggler's
doing, and what the cases cost on the critical path (`detect`: :func:`price_run` for a run read whole,
:func:`price_stored` for one labelled a rank at a time)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any

import polars as pl

from traceql.analyzers import replay
from traceql.analyzers.causes import CAUSES, HELD, held_cases, ranking
from traceql.analyzers.replay.activities import KEY, activities, on_clock, with_labels
from traceql.analyzers.replay.sampling import SAMPLED, WEIGHT, sample_above
from traceql.analyzers.step_breakdown import cause_times, step_breakdown
from traceql.analyzers.stragglers import arrivals, disagreeing, priced, stragglers
from traceql.labelling.inputs import Timeline
from traceql.labelling.kept import Kept
from traceql.labelling.late import late_waits
from traceql.labelling.result import DetectResult
from traceql.model import schema
from traceql.verdicts import kept_replay
from traceql.verdicts.kept_replay import Way

# the what-ifs the ranking needs (the serialized one is `whatif`'s alone)
WAYS = ("without_straggler_ns", "without_contention_ns", "without_communication_ns", "without_idle_ns",
        "without_comm_cpu_ns")


@dataclass
class Priced:
    """A run's causes (``analyzers.causes.CAUSES``), the cases its stragglers caused (``HELD``), what its cases
    cost on the critical path (``schema.CRITICAL``) and what could not be judged (``notes``)."""

    causes: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=CAUSES))
    held: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=HELD))
    critical: pl.DataFrame = field(default_factory=lambda: schema.empty(schema.CRITICAL))
    notes: list[str] = field(default_factory=list)


def clock_note(run: str, skew: int) -> str:
    """What every command says of a run whose ranks' clocks disagree (``skew``: its collectives' end skew)."""
    return (f"note: {run}: its collectives end {skew / 1e6:,.1f} ms apart on the ranks (the median), yet a "
            "collective ends on all at once: their clocks disagree (files of different runs?); no straggler, "
            "replay or cause is measured")


def clocked_comm(ops: pl.LazyFrame) -> pl.DataFrame:
    """Every rank's communication activities of ``ops`` (``activities``) on their run's common clock, as
    ``stragglers.arrivals`` reads them (``short_name``: the collective)."""
    return on_clock(ops.filter(pl.col("kind") == "comm").select(
        "run_id", "rank", "step", "step_kind", "kind", "collective", "start_ns", "end_ns", "launch_ns",
        "clock_offset_ns")).with_columns(pl.col("collective").alias("short_name")).collect()


def named_stragglers(clocked: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, list[tuple[str, int]]]:
    """The stragglers of ``clocked`` (activities on their run's common clock: :func:`clocked_comm`), unpriced; the
    arrivals they come from; the runs whose ranks' clocks disagree, with their end skew (none named there)."""
    comm = clocked.filter(pl.col("kind") == "comm").with_columns(pl.col("collective").alias("short_name"))
    ranks = clocked.select("run_id", "rank").unique().with_columns(pl.lit(0, pl.Int64).alias("clock_offset_ns"))
    arrived = arrivals(comm, ranks)
    skewed = disagreeing(arrived)
    unaligned = [run for run, _ in skewed]
    spans = (clocked.filter(pl.col("step_kind") == "sync").group_by("run_id", "step", "rank")
             .agg((pl.col("end_ns").max() - pl.col("start_ns").min()).alias("gpu_ns"))
             .group_by("run_id", "step").agg(pl.col("gpu_ns").median().cast(pl.Int64).alias("step_ns")))
    named = stragglers(arrived.filter(~pl.col("run_id").is_in(unaligned)), spans)
    return named, arrived, skewed


def priced_causes(ops: pl.DataFrame | replay.Stored, waits: pl.DataFrame | None, lost: pl.DataFrame,
                  mapper: replay.Mapper | None = None, cases: pl.DataFrame | None = None,
                  late: pl.DataFrame | None = None, times: pl.DataFrame | None = None,
                  kept: Kept | None = None) -> Priced:
    """``ops`` (``activities.with_labels``, or stored a file a rank without their cases: ``replay.Stored``, then
    ``cases``: `detect`'s rows of its cases) replayed without each cause: the ranking, the stragglers' cases and
    the critical path of the cases (``lost``: `detect`'s steps). A long run is replayed a window of steps at a
    time (``replay.windowed``; ``mapper``: where the windows are replayed). Runs whose ranks' clocks disagree
    are not replayed (a collective joins its ranks on one axis, which they do not share). ``late``: the
    launches the GPUs waited for (``labelling.late``), which split the idle cause; ``times``: the causes' own
    time a step (``step_breakdown.cause_times``), where the run's step breakdown was made; ``kept``: what the
    stored activities came with (``labelling.kept``), where they are a labelled run's: replayed for `ranks` too,
    or served its replay (``kept_replay``)."""
    lazy = ops.scan() if isinstance(ops, replay.Stored) else ops.lazy()
    clocked = clocked_comm(lazy)  # what the stragglers are named by, of every rank's collectives
    named, arrived, skewed = named_stragglers(clocked)
    out = Priced(notes=[clock_note(run, skew) for run, skew in skewed])
    talking = set(clocked["run_id"].unique().to_list())
    unaligned = tuple(run for run, _ in skewed)
    del clocked
    if isinstance(ops, replay.Stored):  # each window put on the common clock once read, its cases joined then
        if cases is None:
            raise ValueError("stored activities are replayed with their cases")
        keyed = clocked_cases(cases, lazy.select("run_id", "rank", "clock_offset_ns"))
        keyed = keyed.filter(~pl.col("run_id").is_in(unaligned))
        marks, prepare = keyed.drop("step"), partial(aligned, unaligned=unaligned)
    else:  # one copy of the activities, on the common clock, the caller's let go: a large run's replay is its peak
        ops = aligned(ops, unaligned)
        keyed, marks, prepare = ops.filter(pl.col("_case")), None, None
    found = keyed.select(
        "run_id", "rank", "step", "start_ns", "end_ns",
        (pl.col("end_ns") - pl.col("start_ns") - pl.col("_base").round().cast(pl.Int64)).clip(0).alias("lost_ns"))
    how = _detect_options(waits, named)
    if kept is not None and cases is not None and marks is not None and prepare is not None:
        rows = cases
        own = Way(DETECT, how, marks, prepare, unaligned)
        got = kept_replay.replayed(kept, own, (ranks_tag(None), lambda: ranks_way(kept, rows, None)))
    else:
        got = replay.windowed(ops, mapper=mapper, cases=marks, prepare=prepare, **how)
    del ops
    if not got.activities:
        return out
    done = got.steps
    named = named.join(done.select("run_id", "step", pl.col("replayed_ns").alias("step_ns"),
                                   (pl.col("replayed_ns") - pl.col("without_straggler_ns")).alias("cost_ns")),
                       on=["run_id", "step"], how="left")
    named, cheap = priced(named)
    done = unnamed(done, cheap)
    out.causes = ranking(done, set(done["run_id"].to_list()) - talking, late, times)
    out.notes += sampled_notes(done)
    out.held = held_cases(found, arrived, named)
    out.critical = critical_of(done, lost)
    return out


DETECT = {"way": "detect"}  # `detect`'s way of replaying a run (``kept_replay``)


def ranks_tag(untraced: float | None) -> dict[str, Any]:
    """`ranks`' way of replaying a run (``kept_replay``), with the run's untraced step over its traced one."""
    return {"way": "ranks", "untraced": untraced}


def _detect_options(waits: pl.DataFrame | None, named: pl.DataFrame) -> dict[str, Any]:
    """The replay `detect` prices its causes from (``replay.windowed``' options): the trace replayed is the trace
    (every node where it was: `whatif` checks it), so the what-ifs start from it; a long run's steps sampled."""
    return {"waits": waits, "stragglers": named.select("run_id", "step", "rank"), "ways": WAYS,
            "replay_trace": False, "sample": (sample_above(), SAMPLED)}


def ranks_options(waits: pl.DataFrame | None, named: pl.DataFrame, untraced: float | None) -> dict[str, Any]:
    """The replay `ranks` and `whatif` price a run from: every what-if, from the trace as replayed."""
    return {"waits": waits, "stragglers": named.select("run_id", "step", "rank"), "ways": tuple(replay.WAYS),
            "replay_trace": True, "untraced": untraced}


def detect_way(kept: Kept, cases: pl.DataFrame) -> Way:
    """How `detect` replays ``kept``'s run (:func:`priced_causes`; ``cases``: its rows of the slowdown cases)."""
    lazy = kept.stored.scan()
    named, _, skewed = named_stragglers(clocked_comm(lazy))
    unaligned = tuple(run for run, _ in skewed)
    marks = clocked_cases(cases, lazy.select("run_id", "rank", "clock_offset_ns"))
    return Way(DETECT, _detect_options(kept.waits, named), marks.filter(~pl.col("run_id").is_in(unaligned))
               .drop("step"), partial(aligned, unaligned=unaligned), unaligned)


def ranks_way(kept: Kept, cases: pl.DataFrame, untraced: float | None) -> Way | None:
    """How `ranks` replays ``kept``'s run (``ranks.stored_steps``), None where it does not: its ranks' clocks
    disagree."""
    lazy = kept.stored.scan()
    arrived = arrivals(clocked_comm(lazy), kept.ranks.with_columns(pl.lit(0, pl.Int64).alias("clock_offset_ns")))
    if disagreeing(arrived):
        return None
    assert kept.breakdown is not None  # a run that stored its activities made its breakdown too
    named = stragglers(arrived, step_time(kept.breakdown))
    marks = clocked_cases(cases, lazy.select("run_id", "rank", "clock_offset_ns"))
    return Way(ranks_tag(untraced), ranks_options(kept.waits, named, untraced), marks.drop("step"),
               partial(aligned, unaligned=()))


def step_time(steps: pl.DataFrame) -> pl.DataFrame:
    """Per (run_id, step): the median over ranks of the step's GPU time (``steps``: a step breakdown), what a
    straggler's wait is judged by."""
    return steps.group_by("run_id", "step").agg(pl.col("gpu_ns").median().cast(pl.Int64).alias("step_ns"))


def aligned(ops: pl.DataFrame, unaligned: tuple[str, ...]) -> pl.DataFrame:
    """``ops`` but the runs ``unaligned`` (whose ranks' clocks disagree), on their run's common clock."""
    return on_clock(ops.filter(~pl.col("run_id").is_in(list(unaligned))))


def clocked_cases(rows: pl.DataFrame, offsets: pl.LazyFrame) -> pl.DataFrame:
    """`detect`'s ``rows`` of the slowdown cases as the replay marks them (``activities.KEY``, ``step``, ``_case``,
    ``_base``), on their run's common clock (``offsets``: each activity's run, rank and clock offset)."""
    out = rows.filter(pl.col("is_slowdown")).select(*KEY, "step", "baseline_ns")
    out = on_clock(out.join(offsets.unique().collect(), on=["run_id", "rank"], how="left"))
    return out.select(*KEY, "step", pl.lit(True).alias("_case"), pl.col("baseline_ns").alias("_base"))


def straggler_cases(rows: pl.DataFrame, ranks: pl.DataFrame, arrived: pl.DataFrame,
                    named: pl.DataFrame) -> pl.DataFrame:
    """The slowdown cases of `detect`'s ``rows`` that were a straggler's doing (``analyzers.causes.held_cases``;
    ``ranks``: each rank's ``clock_offset_ns``; ``arrived``, ``named``: the arrivals and the stragglers)."""
    cases = on_clock(rows.filter(pl.col("is_slowdown")).join(ranks.select("run_id", "rank", "clock_offset_ns"),
                                                             on=["run_id", "rank"], how="left"))
    return held_cases(cases.select("run_id", "rank", "step", "start_ns", "end_ns", (
        pl.col("duration_ns") - pl.col("baseline_ns").round().cast(pl.Int64)).clip(0).alias("lost_ns")), arrived, named)


def unnamed(done: pl.DataFrame, cheap: pl.DataFrame) -> pl.DataFrame:
    """``done`` (``replay.STEPS``) with the steps of ``cheap`` stragglers as if none was named."""
    if cheap.is_empty():
        return done
    hit = done.join(cheap.select("run_id", "step", pl.lit(True).alias("_cheap")), on=["run_id", "step"],
                    how="left", maintain_order="left")["_cheap"].fill_null(False)
    return done.with_columns(
        pl.when(hit).then(None).otherwise(pl.col("straggler_rank")).alias("straggler_rank"),
        pl.when(hit).then(pl.col("replayed_ns")).otherwise(pl.col("without_straggler_ns"))
        .alias("without_straggler_ns"))


def sampled_notes(done: pl.DataFrame) -> list[str]:
    """What a run whose causes were priced from a sample of its steps (``replay.sampling``) says of it."""
    if WEIGHT not in done.columns:
        return []
    out = []
    for (run_id,), part in done.filter(~pl.col("first")).group_by("run_id", maintain_order=True):
        total = round(float(part[WEIGHT].sum()))
        out.append(f"note: {run_id}: its causes are priced from {part.height:,} of its {total:,} normal steps, "
                   "replayed (every straggler's, and a random sample of the others): each cost with its "
                   "sampling error at 95 %")
    return out


def critical_of(done: pl.DataFrame, lost: pl.DataFrame) -> pl.DataFrame:
    """Per run (``schema.CRITICAL``): what its cases cost on the critical path of its normal steps (``done``:
    ``replay.STEPS``; where only some were replayed, weighted: ``replay.sampling``), summed, and the time they
    lost in those steps (``lost``: `detect`'s steps, all of them where a sample was replayed)."""
    judged = done.filter(~pl.col("first"))
    if WEIGHT not in judged.columns:  # every step replayed
        judged = judged.with_columns(pl.lit(1.0).alias(WEIGHT))
    weight = pl.col(WEIGHT)
    per_run = judged.group_by("run_id").agg(weight.sum().round().cast(pl.Int64).alias("steps"), (
        (pl.col("replayed_ns") - pl.col("without_contention_ns")) * weight).sum().round().cast(pl.Int64)
        .alias("critical_ns"))
    normal = lost.join(done.filter(pl.col("first")).select("run_id", "step"), on=["run_id", "step"], how="anti")
    sampled = WEIGHT in done.columns
    in_steps = (normal if sampled else lost.join(judged.select("run_id", "step"), on=["run_id", "step"])
                ).group_by("run_id").agg(pl.col("time_lost_ns").sum().alias("lost_ns"))
    out = per_run.join(in_steps, on="run_id", how="left").with_columns(pl.col("lost_ns").fill_null(0))
    return schema.conform(out.sort("run_id"), schema.CRITICAL)


def price_run(result: DetectResult, timeline: Timeline) -> DetectResult:
    """``result`` (`detect`'s labels of ``timeline``, a run read whole) with its causes, its stragglers' cases and
    what its cases cost on the critical path, from a replay of its activities."""
    ops = activities(timeline.kernels, timeline.memops, timeline.ranks)
    late = late_waits(ops, timeline.nvtx)
    times = cause_times(step_breakdown(timeline.kernels, timeline.memops, timeline.steps))
    return _with(result, priced_causes(with_labels(ops, result.kernels), timeline.waits, result.steps, late=late,
                                       times=times))


def price_stored(result: DetectResult, kept: Kept) -> None:
    """The same for a run labelled a rank at a time (``labelling.by_rank``'s ``then``): its activities stored a
    file a rank (``kept``), replayed a window of steps at a time through its mapper; ``result`` completed in
    place (the causes' own times from its steps' breakdown, every rank's)."""
    cases = stored_cases(result, [*KEY, "step", "is_slowdown", "baseline_ns"])
    times = cause_times(kept.breakdown) if kept.breakdown is not None else None
    _with(result, priced_causes(kept.stored, kept.waits, result.steps, kept.mapper, cases=cases, late=kept.late,
                                times=times, kept=kept))


def stored_cases(result: DetectResult, columns: list[str]) -> pl.DataFrame:
    """``columns`` of `detect`'s rows of ``result``'s slowdown cases (read from disk where they were stored a rank
    at a time)."""
    rows = result.rows.lazy() if isinstance(result.rows, pl.DataFrame) else result.rows.scan()
    return rows.filter(pl.col("is_slowdown")).select(columns).collect()


def _with(result: DetectResult, found: Priced) -> DetectResult:
    """``result`` with its causes, its stragglers' cases and its critical path (``found``)."""
    result.causes, result.held, result.critical = found.causes, found.held, found.critical
    result.notes += found.notes
    return result
