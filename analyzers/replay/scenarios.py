"""What-ifs on a run's graph (``graph.build``): each a copy of the engine's graph with some durations, lags or
edges changed, replayed by ``engine.replay``.

- :func:`without_contention`: every slowdown case at its baseline (what it would have taken alone).
- ``stragglers.without_stragglers``: each step's straggler as fast as its replicas (that module's doc).
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
from traceql.analyzers.replay.deferred_cpu import moved_cpu, without_cpu
from traceql.analyzers.replay.engine import Graph
from traceql.analyzers.replay.graph import BLOCKED, INFERRED, RECORDED, STREAM, RunGraph


def without_contention(rg: RunGraph, cases: np.ndarray, baseline: np.ndarray) -> Graph:
    """``cases`` (per activity, in node order) at ``baseline`` (ns, per activity) where that is shorter."""
    dur = rg.graph.dur.copy()
    ops = np.flatnonzero(cases & np.isfinite(baseline))
    dur[ops] = np.minimum(dur[ops], np.round(baseline[ops]).astype(np.int64))
    return replace(rg.graph, dur=dur)


def serialized(rg: RunGraph, cases: np.ndarray, baseline: np.ndarray, model: CommAlone | None = None) -> Graph:
    """No overlap (module doc), every case at its baseline, collectives at their speed alone (``model``)."""
    g = without_contention(rg, cases, baseline)
    g = replace(g, tail=alone_tails(rg, model or CommAlone()))
    n = rg.n_ops
    launched, key, deferred = _deferred_order(rg)  # the activities in the order each rank now runs them
    g = replace(g, pred_lag=moved_cpu(rg, g.pred_lag, deferred))
    order = np.full(n, -1, np.int64)
    order[launched] = np.arange(len(launched))
    node = rg.edge_nodes(g)
    pred = g.pred_idx
    # an inferred dependency on an activity that now runs later contradicts that order; a CPU blocked until a
    # deferred all-reduce ended would not have waited for it (it was not yet launched)
    drop = (rg.edge_kind == INFERRED) & (order[np.minimum(pred, n - 1)] > order[np.minimum(node, n - 1)])
    drop |= (rg.edge_kind == BLOCKED) & (pred < n) & deferred[np.minimum(pred, n - 1)]
    keep = ~drop
    same = np.r_[False, rg.rank_key[launched[1:]] == rg.rank_key[launched[:-1]]]
    new_node, new_pred = launched[same], launched[np.flatnonzero(same) - 1]
    all_node = np.r_[node[keep], new_node]
    all_pred = np.r_[pred[keep], new_pred]
    all_lag = np.r_[g.pred_lag[keep], np.zeros(len(new_node), np.int64)]
    o = np.argsort(all_node * np.int64(g.n) + all_pred, kind="stable")  # by node, then predecessor: one key
    ptr = np.zeros(g.n + 1, np.int64)
    np.cumsum(np.bincount(all_node, minlength=g.n), out=ptr[1:])
    # a rank's calls in order, each launch before the activity it launched: every predecessor first
    lane = np.zeros(g.n, np.int64)
    place = np.full(g.n, -1.0)
    if n < g.n:
        lane[:n], lane[n:] = rg.rank_key + 1, rg.rank_key[rg.launch_op] + 1
        place[n:] = 2.0 * np.arange(len(rg.launch_op))
        place[launched] = 2.0 * key + 1.0
    if (place[:n] < 0).any():  # an activity no call launched: no such order is known
        return replace(g, pred_ptr=ptr, pred_idx=all_pred[o], pred_lag=all_lag[o])
    places = np.empty(g.n, np.int64)
    places[np.argsort(place, kind="stable")] = np.arange(g.n)
    return replace(g, pred_ptr=ptr, pred_idx=all_pred[o], pred_lag=all_lag[o], lane=lane, lane_place=places)


def without_comm_cpu(rg: RunGraph) -> Graph:
    """The gradients' all-reduces as cheap to launch as any call (module doc)."""
    return replace(rg.graph, pred_lag=without_cpu(rg, rg.graph.pred_lag, gradient_allreduces(rg)))


def gradient_allreduces(rg: RunGraph) -> np.ndarray:
    """Per activity (node order), whether it is one of a normal step's gradient all-reduces: those nothing
    launched before the step's last one waits for (what :func:`serialized` defers)."""
    return _deferred_order(rg)[2]


def _deferred_order(rg: RunGraph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_order_deferred` of ``rg``, worked out once per graph's activities (the serialized what-ifs and
    the one without communication's CPU work all read it)."""
    held = rg.deferred
    if held is None or held[0] is not rg.ops or held[1] is not rg.launch_op:
        held = rg.deferred = (rg.ops, rg.launch_op, _order_deferred(rg))
    return held[2]


def _order_deferred(rg: RunGraph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The launched activities in the order each rank runs them serialized, each one's key (its launch call's
    place, in call order; a deferred all-reduce's between the last deferred all-reduce of its step and the next
    call), and per activity (node order) whether it is deferred: in each normal step, the all-reduces that
    nothing launched before the step's last one waits for (DDP's gradients; not tensor parallelism's, which
    the next layer reads) go after the activities launched before that last one, in the order they were
    launched."""
    calls = np.arange(len(rg.launch_op), dtype=np.float64)
    frame = rg.ops.select("run_id", "rank", "step", "kind", "step_kind", "collective")[rg.launch_op].select(
        pl.Series("lane", rg.rank_key[rg.launch_op]), pl.col("step").fill_null(-1),
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
    node = rg.edge_nodes(g)
    edge = ((rg.edge_kind == STREAM) | (rg.edge_kind == RECORDED)) & (node < n) & (g.pred_idx < n)
    src, dst = g.pred_idx[edge], node[edge]
    call = np.full(n, -1, np.int64)
    call[rg.launch_op] = np.arange(len(rg.launch_op))
    src, dst = src[(call[src] >= 0) & (call[dst] >= 0)], dst[(call[src] >= 0) & (call[dst] >= 0)]
    src, dst = call[src], call[dst]  # as launch calls
    ok = frame["deferred"].to_numpy().copy()
    step = frame["step"].to_numpy().astype(np.int64)
    group = frame["lane"].to_numpy().astype(np.int64) * (int(step.max()) + 2) + step + 1  # (lane, step)
    for _ in range(8):
        last = np.full(group.max() + 1, -1, np.int64)
        np.maximum.at(last, group[ok], np.flatnonzero(ok))
        waits = ok[src] & ~ok[dst] & (group[src] == group[dst]) & (dst < last[group[dst]])
        if not waits.any():
            break
        ok[src[waits]] = False
    return ok
