"""The CPU work a deferred all-reduce takes with it when the serialized what-if moves it after the backward.

Inside a stock backward each gradient all-reduce costs its launching thread more than its launch call: DDP's
communication hook, the collective's events and stream waits, the work's bookkeeping. In a trace of a
launch-bound model (2 x H200, `datasets/library/h200-i`) the call after an all-reduce's launch comes 100-200 µs
later where the calls of the backward come 20 µs apart, some 1.5 ms a step for ten buckets, and a backward run
by its CPU is that much longer. Serialized, that work happens once the backward's gradients are all computed,
while the all-reduces run.

So the serialized graph takes each deferred all-reduce's excess CPU time (the lag of the call after its launch,
beyond the run's median lag between calls) out of the backward and puts it before the launch of its step's
last deferred all-reduce (the CPU launching them one after another at the backward's end, where it delays the
calls after them, the optimizer's, by that much). The last one's own lag is left: the CPU's way out of the
backward, the same either way.
"""

from __future__ import annotations

import numpy as np

from traceql.analyzers.replay.graph import CHAIN, RunGraph


def moved_cpu(rg: RunGraph, lag: np.ndarray, deferred: np.ndarray) -> np.ndarray:
    """``lag`` (the graph's edge lags, CSR order as ``rg.graph``) with the CPU time of the ``deferred``
    activities' launches (per activity, in node order) moved to the end of their step (module doc)."""
    g, n = rg.graph, rg.n_ops
    node = np.repeat(np.arange(g.n), np.diff(g.pred_ptr))
    pred = g.pred_idx
    chain = (rg.edge_kind == CHAIN) & (node >= n)
    launches = rg.launch_of[deferred]
    launches = launches[launches >= 0]
    if not chain.any() or not len(launches):
        return lag
    group = np.full(g.n, -1, np.int64)  # per launch node: its (rank, step)
    ops = rg.ops
    steps = ops["step"].fill_null(-1).to_numpy().astype(np.int64)[rg.launch_op]
    ranks = ops.select("run_id", "rank").to_struct().rank("dense").to_numpy().astype(np.int64)[rg.launch_op]
    group[n:] = ranks * (steps.max() + 2) + steps + 1
    last = np.zeros(g.n, bool)
    tops = np.full(group.max() + 1, -1, np.int64)
    np.maximum.at(tops, group[launches], launches)
    last[tops[tops >= 0]] = True
    is_deferred = np.zeros(g.n, bool)
    is_deferred[launches] = True
    out = lag.copy()
    typical = float(np.median(lag[chain]))
    after = chain & is_deferred[pred] & ~last[pred]
    excess = np.maximum(out[after] - typical, 0).astype(np.int64)
    out[after] -= excess
    moved = np.bincount(group[pred[after]], weights=excess, minlength=len(tops)).astype(np.int64)
    into_last = chain & last[node]
    out[into_last] += moved[group[node[into_last]]]
    return out
