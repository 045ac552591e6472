"""What-ifs on a run's graph (``graph.build``): each a copy of the engine's graph with some durations, lags or
edges changed, replayed by ``engine.replay``.

- :func:`without_contention`: every slowdown case at its baseline (what it would have taken alone).
- :func:`without_stragglers`: in each step that had a straggler, that rank's CPU takes no longer than its
  replicas' CPUs took between the same launches (the median of theirs, launch by launch: the k-th launch of an
  activity's name in the step; a launch they never made no longer than their typical one), and starts the step
  as long after its GPU's previous work as they did, so that it arrives at the collectives as they do; and no
  activity of that step takes longer than it took in its rank's other steps (while the others waited, their
  collectives sat on the GPU beside their computation and slowed it); what the straggler ran in that step and
  never in its other steps (extra work on its GPU) takes no time; where that extra work lasted
  :data:`LATE_GPU_NS` or more (a late GPU, which leaves the CPU slow for the rest of the step), none of the
  straggler's launches after its first comes later after what it waited for (its previous call, or GPU work it
  was blocked on) than its own CPU took before the same launch in its normal steps. The ranks that waited
  launch nothing later after the step's first launch than they did in their normal steps (their GPU sat
  stalled, so a slow CPU cost nothing then, and would without the straggler). Nothing takes longer than
  it did: a step is never slower without its straggler.
- :func:`serialized`: no overlap: each rank runs its activities one at a time, in the order it launched them,
  but the gradients' all-reduces of a step deferred until the computation launched before the last of them has
  run (as DDP with every bucket reduced after the backward); every case at its baseline, every collective at
  its speed alone (``alone``).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import polars as pl

from traceql.analyzers.replay.alone import CommAlone, alone_tails
from traceql.analyzers.replay.engine import Graph
from traceql.analyzers.replay.graph import BLOCKED, CHAIN, INFERRED, RECORDED, STREAM, RunGraph

LATE_GPU_NS = 1_000_000  # a straggler's GPU ran this much work its other steps never ran: its GPU was late


def without_contention(rg: RunGraph, cases: np.ndarray, baseline: np.ndarray) -> Graph:
    """``cases`` (per activity, in node order) at ``baseline`` (ns, per activity) where that is shorter."""
    dur = rg.graph.dur.copy()
    ops = np.flatnonzero(cases & np.isfinite(baseline))
    dur[ops] = np.minimum(dur[ops], np.round(baseline[ops]).astype(np.int64))
    return replace(rg.graph, dur=dur)


def without_stragglers(rg: RunGraph, named: pl.DataFrame) -> Graph:
    """``named``: the stragglers (``run_id``, ``step``, ``rank``), each removed from its step (module doc)."""
    g = rg.graph
    if named.is_empty():
        return g
    lag = g.pred_lag.copy()
    node = np.repeat(np.arange(g.n), np.diff(g.pred_ptr))
    chain = np.flatnonzero(rg.edge_kind == CHAIN)
    slot = np.full(len(rg.launch_op), -1, np.int64)
    slot[node[chain] - rg.n_ops] = chain
    by_name = "_name" in rg.ops.columns
    key = (pl.col("_name") if by_name else pl.lit("")).alias("_key")
    calls = rg.ops.select("run_id", "rank", "step", key)[rg.launch_op].with_columns(
        pl.Series("slot", slot), pl.Series("lag", np.where(slot >= 0, lag[np.maximum(slot, 0)], 0)),
        pl.Series("call", np.arange(len(rg.launch_op), dtype=np.int64)),
        pl.Series("at", rg.measured.start[rg.n_ops:]))
    # the same launch on every rank: the k-th of its activity's name in the step (the k-th of the step without names)
    calls = calls.with_columns(pl.int_range(pl.len()).over("run_id", "rank", "step", "_key").alias("pos"))
    bounds = _step_bounds(rg)
    usual = _usual_lags(calls, named)
    blocked = np.flatnonzero(rg.edge_kind == BLOCKED)
    blocked_at = np.full(len(rg.launch_op), -1, np.int64)
    blocked_at[node[blocked] - rg.n_ops] = blocked
    # each frame cut once by what the loop asks of it (a long run names a straggler in many steps)
    by_step = _parted(calls, named, ["run_id", "step"])
    usual_of = usual.partition_by("run_id", "rank", as_dict=True, maintain_order=True)  # every rank: they wait
    bounds_of = _parted(bounds, named, ["run_id", "step"])
    for run, step, rank in named.select("run_id", "step", "rank").iter_rows():
        mine = by_step.get((run, step), calls.clear())
        own = mine.filter(pl.col("rank") == rank)
        others = mine.filter(pl.col("rank") != rank)
        slots = own["slot"].to_numpy()
        if others.is_empty() or not len(slots):
            continue
        theirs = others.group_by("_key", "pos").agg(pl.col("lag").median().alias("theirs"))
        # a launch the others never made (the straggler's extra work): no longer than their typical lag
        matched = own.join(theirs, on=["_key", "pos"], how="left", maintain_order="left")
        typical = float(others["lag"].median())
        new = np.minimum(own["lag"].to_numpy(), matched["theirs"].fill_null(typical).round().cast(pl.Int64).to_numpy())
        if slots[0] >= 0:  # the step's first launch: as late after its GPU's previous work as the others' were
            new[0] = min(new[0], _first_lag(rg, bounds_of.get((run, step), bounds.clear()), rank,
                                            int(g.pred_idx[slots[0]])))
        keep = slots >= 0
        lag[slots[keep]] = new[keep]
        for (other,), waiting in others.group_by("rank"):
            _no_slower_than_usual(lag, waiting, usual_of.get((run, other), usual.clear()))
        # a late GPU (work its other steps never ran: a delay, a slower or busier GPU) leaves its CPU slow for the
        # rest of the step once the GPU has drained the queue: after its first launch, none later after what it
        # waited for (its previous call, or the GPU work it was blocked on) than its CPU in its normal steps
        mine_usual = usual_of.get((run, rank), usual.clear())
        extra = own.filter(~pl.col("_key").is_in(mine_usual["_key"].unique().implode()))["call"].to_numpy()
        if by_name and g.dur[rg.launch_op[extra]].sum() >= LATE_GPU_NS:
            cap = own.join(mine_usual, on=["run_id", "rank", "_key", "pos"], how="left", maintain_order="left")["usual"]
            cap = cap.fill_null(np.iinfo(np.int64).max).to_numpy()[1:]
            for edges in (slots[1:], blocked_at[own["call"].to_numpy()[1:]]):
                ok = edges >= 0
                lag[edges[ok]] = np.minimum(lag[edges[ok]], cap[ok])
    return replace(g, pred_lag=lag, dur=np.minimum(g.dur, _typical_durations(rg, named)))


def _parted(frame: pl.DataFrame, named: pl.DataFrame, by: list[str]) -> dict[tuple, pl.DataFrame]:
    """``frame``'s rows of the runs and ``by`` keys ``named`` names, a frame per key."""
    wanted = named.select([pl.col(c).cast(frame.schema[c]) for c in by]).unique()
    return frame.join(wanted, on=by, how="semi").partition_by(by, as_dict=True, maintain_order=True)


def _no_slower_than_usual(lag: np.ndarray, calls: pl.DataFrame, usual: pl.DataFrame) -> None:
    """A waiting rank's CPU in a step it waited in (``calls``: its launches there, in call order): no launch
    later after the step's first than the same launch came in the rank's normal steps (the median, ``usual``'s
    ``offset``), where the trace has it later. Its GPU sat stalled on the straggler, so a slow CPU cost nothing
    then; without the straggler it would, and its CPU's usual pace is the better guess."""
    calls = calls.sort("call").with_columns((pl.col("at") - pl.col("at").first()).alias("own"))
    mark = calls.join(usual, on=["run_id", "rank", "_key", "pos"], how="left", maintain_order="left")
    capped = np.maximum.accumulate(np.minimum(mark["own"].to_numpy(),
                                              mark["offset"].fill_null(np.iinfo(np.int64).max).to_numpy()))
    slots = mark["slot"].to_numpy()[1:]
    ok = slots >= 0
    lag[slots[ok]] = np.minimum(lag[slots[ok]], np.diff(capped)[ok])


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


def _first_lag(rg: RunGraph, bounds: pl.DataFrame, rank: int, previous: int) -> int:
    """The lag after its ``previous`` launch that starts the straggler's first launch of a step as long after its
    GPU finished the earlier steps as the other ranks' first launches started after theirs (the median;
    ``bounds``: :func:`_step_bounds`' rows of the step): the CPU time between two steps' launches is mostly a
    wait for the GPU, which launch-by-launch lags cannot tell."""
    gaps = bounds.filter(pl.col("before").is_not_null())
    others = (gaps["launch"] - gaps["before"]).filter(gaps["rank"] != rank)
    own = gaps.filter(pl.col("rank") == rank)
    if others.is_empty() or own.is_empty():
        return np.iinfo(np.int64).max
    return max(0, int(own["before"][0] + others.median() - rg.measured.start[previous]))


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


def serialized(rg: RunGraph, cases: np.ndarray, baseline: np.ndarray, model: CommAlone | None = None) -> Graph:
    """No overlap (module doc), every case at its baseline, collectives at their speed alone (``model``)."""
    g = without_contention(rg, cases, baseline)
    g = replace(g, tail=alone_tails(rg, model or CommAlone()))
    n = rg.n_ops
    launched, key, deferred = _deferred_order(rg)  # the activities in the order each rank now runs them
    order = np.full(n, -1, np.int64)
    order[launched] = np.arange(len(launched))
    node = np.repeat(np.arange(g.n), np.diff(g.pred_ptr))
    pred = g.pred_idx
    # an inferred dependency on an activity that now runs later contradicts that order; a CPU blocked until a
    # deferred all-reduce ended would not have waited for it (it was not yet launched)
    drop = (rg.edge_kind == INFERRED) & (order[np.minimum(pred, n - 1)] > order[np.minimum(node, n - 1)])
    drop |= (rg.edge_kind == BLOCKED) & (pred < n) & deferred[np.minimum(pred, n - 1)]
    keep = ~drop
    rank = rg.ops["run_id"].cast(pl.String) + "/" + rg.ops["rank"].cast(pl.String)
    same = np.r_[False, (rank.gather(launched[1:]) == rank.gather(launched[:-1])).to_numpy()]
    new_node, new_pred = launched[same], launched[np.flatnonzero(same) - 1]
    all_node = np.r_[node[keep], new_node]
    all_pred = np.r_[pred[keep], new_pred]
    all_lag = np.r_[g.pred_lag[keep], np.zeros(len(new_node), np.int64)]
    o = np.lexsort((all_pred, all_node))
    ptr = np.zeros(g.n + 1, np.int64)
    np.cumsum(np.bincount(all_node, minlength=g.n), out=ptr[1:])
    # a rank's calls in order, each launch before the activity it launched: every predecessor first
    lane = np.zeros(g.n, np.int64)
    place = np.full(g.n, -1.0)
    if n < g.n:
        rank_of = rg.ops.select(pl.struct("run_id", "rank").rank("dense").cast(pl.Int64)).to_series().to_numpy()
        lane[:n], lane[n:] = rank_of, rank_of[rg.launch_op]
        place[n:] = 2.0 * np.arange(len(rg.launch_op))
        place[launched] = 2.0 * key + 1.0
    if (place[:n] < 0).any():  # an activity no call launched: no such order is known
        return replace(g, pred_ptr=ptr, pred_idx=all_pred[o], pred_lag=all_lag[o])
    places = np.empty(g.n, np.int64)
    places[np.argsort(place, kind="stable")] = np.arange(g.n)
    return replace(g, pred_ptr=ptr, pred_idx=all_pred[o], pred_lag=all_lag[o], lane=lane, lane_place=places)


def gradient_allreduces(rg: RunGraph) -> np.ndarray:
    """Per activity (node order), whether it is one of a normal step's gradient all-reduces: those nothing
    launched before the step's last one waits for (what :func:`serialized` defers)."""
    return _deferred_order(rg)[2]


def _deferred_order(rg: RunGraph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The launched activities in the order each rank runs them serialized, each one's key (its launch call's
    place, in call order; a deferred all-reduce's between the last deferred all-reduce of its step and the next
    call), and per activity (node order) whether it is deferred: in each normal step, the all-reduces that
    nothing launched before the step's last one waits for (DDP's gradients; not tensor parallelism's, which
    the next layer reads) go after the activities launched before that last one, in the order they were
    launched."""
    calls = np.arange(len(rg.launch_op), dtype=np.float64)
    frame = rg.ops.select("run_id", "rank", "step", "kind", "step_kind", "collective")[rg.launch_op].select(
        pl.struct("run_id", "rank").rank("dense").alias("lane"), pl.col("step").fill_null(-1),
        ((pl.col("kind") == "comm") & (pl.col("step_kind") == "sync")
         & pl.col("collective").cast(pl.String).str.starts_with("AllReduce")).fill_null(False).alias("deferred"),
    ).with_columns(pl.Series("call", calls))
    frame = frame.with_columns(pl.Series("deferred", _deferrable(rg, frame)))
    frame = frame.with_columns(
        pl.when(pl.col("deferred")).then(pl.col("call")).max().over("lane", "step").alias("last"),
        pl.col("deferred").cast(pl.Int64).cum_sum().over("lane", "step").alias("nth"),
        pl.col("deferred").sum().over("lane", "step").alias("count"))
    # keys in (last + 0.1, last + 0.4): after the last all-reduce's call, before the next call
    key = frame.select(pl.when(pl.col("deferred"))
                       .then(pl.col("last") + 0.1 + 0.3 * pl.col("nth") / (pl.col("count") + 1))
                       .otherwise(pl.col("call"))).to_series().to_numpy()
    lane = frame["lane"].to_numpy()
    order = np.lexsort((calls, key, lane))
    deferred = np.zeros(rg.n_ops, bool)
    deferred[rg.launch_op] = frame["deferred"].to_numpy()
    return rg.launch_op[order], key[order], deferred


def _deferrable(rg: RunGraph, frame: pl.DataFrame) -> np.ndarray:
    """Per launch call (``frame``: ``lane``, ``step``, ``deferred`` candidates, ``call``), whether its all-reduce
    can wait for the end of its step: no activity of its step launched before the step's last such all-reduce
    waits for it (a stream or recorded dependency; an inferred one is a guess), the last taken again until none
    changes."""
    n, g = rg.n_ops, rg.graph
    node = np.repeat(np.arange(g.n), np.diff(g.pred_ptr))
    edge = np.isin(rg.edge_kind, (STREAM, RECORDED)) & (node < n) & (g.pred_idx < n)
    src, dst = g.pred_idx[edge], node[edge]
    call = np.full(n, -1, np.int64)
    call[rg.launch_op] = np.arange(len(rg.launch_op))
    src, dst = src[(call[src] >= 0) & (call[dst] >= 0)], dst[(call[src] >= 0) & (call[dst] >= 0)]
    src, dst = call[src], call[dst]  # as launch calls
    ok = frame["deferred"].to_numpy().copy()
    group = frame.select(pl.struct("lane", "step").rank("dense").cast(pl.Int64)).to_series().to_numpy()
    for _ in range(8):
        last = np.full(group.max() + 1, -1, np.int64)
        np.maximum.at(last, group[ok], np.flatnonzero(ok))
        waits = ok[src] & ~ok[dst] & (group[src] == group[dst]) & (dst < last[group[dst]])
        if not waits.any():
            break
        ok[src[waits]] = False
    return ok
