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

:func:`without_cpu` takes that excess out altogether: the step as it would be if communication cost its CPU
nothing beyond a launch (what ``causes`` prices as *communication's CPU work*).
"""

from __future__ import annotations

import numpy as np

from traceql.analyzers.replay.graph import CHAIN, RunGraph


def _excess(rg: RunGraph, lag: np.ndarray, deferred: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """The edges after the ``deferred`` launches (all but each step's last), their excess lag, each launch
    node's (rank, step) group, the groups' last deferred launches, and every edge's node; None where there are
    none (no CPU chain, nothing deferred)."""
    g, n = rg.graph, rg.n_ops
    node = rg.edge_nodes(g)
    chain = (rg.edge_kind == CHAIN) & (node >= n)
    launches = rg.launch_of[deferred]
    launches = launches[launches >= 0]
    if not chain.any() or not len(launches):
        return None
    group = np.full(g.n, -1, np.int64)  # per launch node: its (rank, step)
    steps = rg.ops["step"].fill_null(-1).to_numpy().astype(np.int64)[rg.launch_op]
    ranks = rg.rank_key[rg.launch_op]
    group[n:] = ranks * (steps.max() + 2) + steps + 1
    last = np.zeros(g.n, bool)
    tops = np.full(group.max() + 1, -1, np.int64)
    np.maximum.at(tops, group[launches], launches)
    last[tops[tops >= 0]] = True
    is_deferred = np.zeros(g.n, bool)
    is_deferred[launches] = True
    after = chain & is_deferred[g.pred_idx] & ~last[g.pred_idx]
    excess = np.maximum(lag[after] - float(np.median(lag[chain])), 0).astype(np.int64)
    return after, excess, group, chain & last[node], node


def moved_cpu(rg: RunGraph, lag: np.ndarray, deferred: np.ndarray) -> np.ndarray:
    """``lag`` (the graph's edge lags, CSR order as ``rg.graph``) with the CPU time of the ``deferred``
    activities' launches (per activity, in node order) moved to the end of their step (module doc)."""
    found = _excess(rg, lag, deferred)
    if found is None:
        return lag
    after, excess, group, into_last, node = found
    out = lag.copy()
    out[after] -= excess
    moved = np.bincount(group[rg.graph.pred_idx[after]], weights=excess, minlength=group.max() + 1).astype(np.int64)
    out[into_last] += moved[group[node[into_last]]]
    return out


def without_cpu(rg: RunGraph, lag: np.ndarray, deferred: np.ndarray) -> np.ndarray:
    """``lag`` with the ``deferred`` activities' launches' excess CPU time taken out (module doc)."""
    found = _excess(rg, lag, deferred)
    if found is None:
        return lag
    after, excess = found[:2]
    out = lag.copy()
    out[after] -= excess
    return out
