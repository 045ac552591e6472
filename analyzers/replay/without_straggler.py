"""The straggler what-if (:func:`without_stragglers`): in each step that had a straggler, that rank's CPU
takes no longer than its replicas' CPUs took between the same launches (the median of theirs, launch by launch:
the k-th launch of an activity's name in the step; a launch they never made no longer than their typical one),
and starts the step as long after its GPU's previous work as they did, so that it arrives at the collectives as
they do; and no activity of that step takes longer than it took in its rank's other steps (while the others
waited, their collectives sat on the GPU beside their computation and slowed it); what the straggler ran in that
step and never in its other steps (extra work on its GPU) takes no time; where that extra work lasted
:data:`LATE_GPU_NS` or more (a late GPU, which leaves the CPU slow for the rest of the step), none of the
straggler's launches after its first comes later after what it waited for (its previous call, or GPU work it
was blocked on) than its own CPU took before the same launch in its normal steps. The ranks that waited launch
nothing later after the step's first launch than they did in their normal steps (their GPU sat stalled, so a
slow CPU cost nothing then, and would without the straggler). Nothing takes longer than it did: a step is never
slower without its straggler.

The figures each straggler step needs are found for all of them at once (joins and group-bys over the run's
launch calls); only putting them into the graph's lags goes a straggler at a time, in the order they are named
(where one step names two, what one sets the other may lower).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import cast

import numpy as np
import polars as pl

from traceql.analyzers.replay.engine import Graph
from traceql.analyzers.replay.graph import BLOCKED, CHAIN, RunGraph

LATE_GPU_NS = 1_000_000  # a straggler's GPU ran this much work its other steps never ran: its GPU was late
NO_CAP = np.iinfo(np.int64).max
STEP = ["run_id", "step"]
LAUNCH = ["run_id", "rank", "_key", "pos"]


@dataclass
class _Straggler:
    """What one named straggler step sets: its own launches' lags (``slots``: their chain edges, -1 for none;
    ``new``), the waiting ranks' caps (``waiting``: ids of :func:`_waiting_caps`' groups) and, for a late GPU,
    caps on the edges after its first launch (``late``: edges and caps)."""

    slots: np.ndarray
    new: np.ndarray
    waiting: list[int]
    late: tuple[np.ndarray, np.ndarray] | None


def without_stragglers(rg: RunGraph, named: pl.DataFrame) -> Graph:
    """``named``: the stragglers (``run_id``, ``step``, ``rank``), each removed from its step (module doc)."""
    g = rg.graph
    if named.is_empty():
        return g
    lag = g.pred_lag.copy()
    node = rg.edge_nodes(g)
    chain = np.flatnonzero(rg.edge_kind == CHAIN)
    slot = np.full(len(rg.launch_op), -1, np.int64)
    slot[node[chain] - rg.n_ops] = chain
    blocked = np.flatnonzero(rg.edge_kind == BLOCKED)
    blocked_at = np.full(len(rg.launch_op), -1, np.int64)
    blocked_at[node[blocked] - rg.n_ops] = blocked
    by_name = "_name" in rg.ops.columns
    key = (pl.col("_name") if by_name else pl.lit("")).alias("_key")
    calls = rg.ops.select("run_id", "rank", "step", key)[rg.launch_op].with_columns(
        pl.Series("slot", slot), pl.Series("lag", np.where(slot >= 0, lag[np.maximum(slot, 0)], 0)),
        pl.Series("call", np.arange(len(rg.launch_op), dtype=np.int64)),
        pl.Series("at", rg.measured.start[rg.n_ops:]))
    # the same launch on every rank: the k-th of its activity's name in the step (the k-th of the step without names)
    calls = calls.with_columns(pl.int_range(pl.len()).over("run_id", "rank", "step", "_key").alias("pos"))
    usual = _usual_lags(calls, named)
    wanted = named.select("run_id", pl.col("step").cast(calls.schema["step"]),
                          pl.col("rank").cast(calls.schema["rank"]).alias("_rank")).with_row_index("_n")
    mine = calls.join(wanted.select(STEP).unique(), on=STEP, how="semi", maintain_order="left")
    caps, groups = _waiting_caps(mine, usual)
    late_dur = g.dur[rg.launch_op] if by_name else None
    for s in _stragglers(rg, mine, wanted, usual, groups, late_dur, blocked_at):
        keep = s.slots >= 0
        lag[s.slots[keep]] = s.new[keep]
        for gid in s.waiting:
            slots, cap = caps[gid]
            lag[slots] = np.minimum(lag[slots], cap)
        if s.late is not None:
            edges, cap = s.late
            lag[edges] = np.minimum(lag[edges], cap)
    return replace(g, pred_lag=lag, dur=np.minimum(g.dur, _typical_durations(rg, named)))


def _stragglers(rg: RunGraph, mine: pl.DataFrame, wanted: pl.DataFrame, usual: pl.DataFrame,
                groups: dict[tuple, list[tuple[int, int]]], late_dur: np.ndarray | None,
                blocked_at: np.ndarray) -> list[_Straggler]:
    """Each named straggler step's :class:`_Straggler`, in the order they are named (those with no launch of
    their own or no other rank in the step are left out: nothing to compare)."""
    pairs = mine.join(wanted, on=STEP, how="inner", maintain_order="left")
    own = pairs.filter(pl.col("rank") == pl.col("_rank")).sort("_n", maintain_order=True)
    others = pairs.filter(pl.col("rank") != pl.col("_rank"))
    theirs = others.group_by("_n", "_key", "pos").agg(pl.col("lag").median().alias("theirs"))
    typical = others.group_by("_n").agg(pl.col("lag").median().alias("typical"))
    known = usual.select("run_id", "rank", "_key").unique().with_columns(pl.lit(True).alias("_known"))
    own = (own.join(typical, on="_n", how="inner", maintain_order="left")
           .join(theirs, on=["_n", "_key", "pos"], how="left", maintain_order="left")
           .join(usual.select(*LAUNCH, "usual"), on=LAUNCH, how="left", maintain_order="left")
           .join(known, on=["run_id", "rank", "_key"], how="left", maintain_order="left")
           .with_columns(pl.min_horizontal("lag", pl.col("theirs").fill_null(pl.col("typical")).round()
                                           .cast(pl.Int64)).alias("new"),
                         (pl.col("_known").is_null() & pl.col("_key").is_not_null()).alias("extra")))
    first = _first_lags(rg, wanted)
    ns = own["_n"].to_numpy()
    cuts = np.flatnonzero(np.diff(ns)) + 1
    arrays = {c: np.split(own[c].to_numpy(), cuts) for c in ("slot", "new", "call", "extra")}
    arrays["usual"] = np.split(own["usual"].fill_null(NO_CAP).to_numpy(), cuts)
    rows = wanted.rows()
    out = []
    for i, n in enumerate(ns[np.r_[0, cuts]] if len(ns) else []):
        _, run, step, rank = rows[n]
        slots, new, call = arrays["slot"][i], arrays["new"][i].copy(), arrays["call"][i]
        if slots[0] >= 0:  # the step's first launch: as late after its GPU's previous work as the others' were
            new[0] = min(new[0], _first_lag(first.get(int(n)), rg.measured.start[rg.graph.pred_idx[slots[0]]]))
        late = None
        # a late GPU (work its other steps never ran: a delay, a slower or busier GPU) leaves its CPU slow for the
        # rest of the step once the GPU has drained the queue: after its first launch, none later after what it
        # waited for (its previous call, or the GPU work it was blocked on) than its CPU in its normal steps
        if late_dur is not None and late_dur[call[arrays["extra"][i]]].sum() >= LATE_GPU_NS:
            cap = arrays["usual"][i][1:]
            edges = np.r_[slots[1:], blocked_at[call[1:]]]
            cap = np.r_[cap, cap]
            late = (edges[edges >= 0], cap[edges >= 0])
        out.append(_Straggler(slots, new, [gid for r, gid in groups.get((run, step), []) if r != rank], late))
    return out


def _first_lags(rg: RunGraph, wanted: pl.DataFrame) -> dict[int, tuple[float, float]]:
    """Per named straggler step (``_n``) with a figure to go by: its rank's GPU's end of the earlier steps
    (``before``) and the median time the other ranks' first launches of the step came after theirs."""
    bounds = _step_bounds(rg).filter(pl.col("before").is_not_null()).join(wanted, on=STEP, how="inner")
    others = bounds.filter(pl.col("rank") != pl.col("_rank")).group_by("_n").agg(
        (pl.col("launch") - pl.col("before")).median().alias("gap"))
    own = bounds.filter(pl.col("rank") == pl.col("_rank")).group_by("_n").agg(pl.col("before").first())
    both = own.join(others, on="_n", how="inner")
    return {n: (before, gap) for n, before, gap in both.select("_n", "before", "gap").iter_rows()}


def _first_lag(figures: tuple[float, float] | None, previous_start: int) -> int:
    """The lag after the straggler's previous launch (which started at ``previous_start``) that starts its first
    launch of the step as long after its GPU finished the earlier steps as the other ranks' first launches
    started after theirs (``figures``: :func:`_first_lags`'): the CPU time between two steps' launches is mostly
    a wait for the GPU, which launch-by-launch lags cannot tell."""
    if figures is None:
        return NO_CAP
    before, gap = figures
    return max(0, int(before + gap - previous_start))


def _waiting_caps(mine: pl.DataFrame, usual: pl.DataFrame) -> tuple[list[tuple[np.ndarray, np.ndarray]],
                                                                     dict[tuple, list[tuple[int, int]]]]:
    """Per rank of a straggler step (``mine``: the launch calls of those steps, in call order), the caps on
    its launches' lags should it be a rank that waited: no launch later after the step's first than the same
    launch came in the rank's normal steps (the median, ``usual``'s ``offset``), where the trace has it later.
    Its GPU sat stalled on the straggler, so a slow CPU cost nothing then; without the straggler it would, and
    its CPU's usual pace is the better guess. The caps (chain edges and their caps) a group, and each step's
    groups with their rank."""
    by = ["run_id", "step", "rank"]
    mark = mine.join(usual.select(*LAUNCH, "offset"), on=LAUNCH, how="left", maintain_order="left").with_columns(
        pl.min_horizontal(pl.col("at") - pl.col("at").first().over(by), pl.col("offset").fill_null(NO_CAP))
        .cum_max().over(by).alias("capped"))
    mark = mark.with_columns(pl.col("capped").diff().over(by).alias("cap"),
                             (pl.int_range(pl.len()).over(by) > 0).alias("_later"))
    mark = mark.with_columns(pl.struct(by).rank("dense").cast(pl.Int64).alias("_g") - 1).sort(
        "_g", maintain_order=True)
    later = mark.filter(pl.col("_later"), pl.col("slot") >= 0)
    gids = later["_g"].to_numpy()
    n_groups = int(cast(int, mark["_g"].max())) + 1 if mark.height else 0
    cuts = np.searchsorted(gids, np.arange(1, n_groups))
    caps = list(zip(np.split(later["slot"].to_numpy(), cuts), np.split(later["cap"].to_numpy(), cuts), strict=True))
    groups: dict[tuple, list[tuple[int, int]]] = {}
    for run, step, rank, gid in mark.select(*by, "_g").unique(maintain_order=True).iter_rows():
        groups.setdefault((run, step), []).append((rank, gid))
    return caps, groups


def _usual_lags(calls: pl.DataFrame, named: pl.DataFrame) -> pl.DataFrame:
    """Per run, rank and launch (``_key``, ``pos``), the median lag of its rank's CPU before it over the rank's
    normal steps (``usual``) and the median time it came after its step's first launch (``offset``): neither
    the run's first captured step nor a step the rank was named in."""
    on = ["run_id", "step", "rank"]
    held = named.select("run_id", pl.col("step").cast(pl.Int32), pl.col("rank").cast(pl.Int32)).unique()
    steps = calls.filter(pl.col("step").is_not_null(), pl.col("slot") >= 0).with_columns(
        pl.col("step").cast(pl.Int32), pl.col("rank").cast(pl.Int32))
    first = pl.col("step") == pl.col("step").min().over("run_id")
    normal = steps.join(held.with_columns(pl.lit(True).alias("_held")), on=on, how="left").filter(
        pl.col("_held").is_null(), ~first)
    normal = normal.with_columns((pl.col("at") - pl.col("at").min().over(on)).alias("offset"))
    return normal.group_by("run_id", "rank", "_key", "pos").agg(
        pl.col("lag").median().round().cast(pl.Int64).alias("usual"),
        pl.col("offset").median().round().cast(pl.Int64).alias("offset"))


def _step_bounds(rg: RunGraph) -> pl.DataFrame:
    """Per run, rank and step: its first launch (``launch``) and the end of the rank's GPU work of the earlier
    steps (``before``)."""
    t = rg.measured
    never = np.iinfo(np.int64).max
    per = (rg.ops.select("run_id", "rank", "step").with_columns(
        pl.Series("end", t.end[:rg.n_ops]),
        pl.Series("launch", np.where(rg.launch_of >= 0, t.start[np.maximum(rg.launch_of, 0)], never)))
        .filter(pl.col("step").is_not_null())
        .group_by("run_id", "rank", "step").agg(pl.col("launch").min(), pl.col("end").max()).sort("step"))
    return per.with_columns(pl.col("end").cum_max().shift(1).over("run_id", "rank").alias("before"))


def _typical_durations(rg: RunGraph, named: pl.DataFrame) -> np.ndarray:
    """Durations where every activity of a step that had a straggler takes what the same activity took in its
    rank's other steps (the median): the ranks that waited ran their computation beside collectives that sat
    waiting, and slower. The same activity: the k-th of its name in the step's launches where the activities
    carry their names (``_name``), else the k-th of the step where those steps launched as many. The
    straggler's own activities that its other steps never ran (extra work on its GPU: a delay, a rank with more
    to do) take no time."""
    dur = rg.graph.dur.copy()
    by_name = "_name" in rg.ops.columns
    name = pl.col("_name") if by_name else pl.lit("")
    steps = (rg.ops.with_columns(pl.Series("dur", dur[:rg.n_ops]), name.alias("_key"))
             .filter(pl.col("step_kind") == "sync", pl.col("kind") != "comm")
             .select("node", "run_id", "rank", "step", "correlation_id", "start_ns", "dur", "_key")
             .sort("correlation_id", "start_ns", nulls_last=True, maintain_order=True)
             .with_columns(pl.int_range(pl.len()).over("run_id", "rank", "step", "_key").alias("pos"),
                           (pl.lit(0) if by_name else pl.len().over("run_id", "rank", "step")).alias("count")))
    first = steps.group_by("run_id").agg(pl.col("step").min().alias("first"))
    held = named.select("run_id", pl.col("step").cast(pl.Int32), pl.col("rank").cast(pl.Int32).alias("_late"))
    held = held.unique(["run_id", "step"]).with_columns(pl.lit(True).alias("held"))
    steps = (steps.join(first, on="run_id").join(held, on=["run_id", "step"], how="left")
             .with_columns(pl.col("held").fill_null(False)))
    match = ["run_id", "rank", "_key", "count", "pos"]
    normal = steps.filter(~pl.col("held"), pl.col("step") != pl.col("first"))
    typical = normal.group_by(match).agg(pl.col("dur").median().alias("typical"))
    target = steps.filter(pl.col("held")).join(typical, on=match, how="left")
    if by_name and not normal.is_empty():  # the straggler's extra work: nothing like it in its normal steps
        ran = normal.select("run_id", "rank").unique().with_columns(pl.lit(True).alias("_ran"))
        target = target.join(ran, on=["run_id", "rank"], how="left").with_columns(
            pl.when(pl.col("typical").is_null() & (pl.col("rank") == pl.col("_late")) & pl.col("_ran"))
            .then(0.0).otherwise(pl.col("typical")).alias("typical"))
    target = target.filter(pl.col("typical").is_not_null())
    dur[target["node"].to_numpy()] = target["typical"].round().cast(pl.Int64).to_numpy()
    return dur
