"""The CPU work the serialized what-if moves with each deferred all-reduce (``analyzers.replay.deferred_cpu``), on
a real launch-bound trace: the two-tower recommender on 2 x H200, whose stock backward spends 100-200 µs of its
launching thread after each all-reduce's launch where its calls are 20 µs apart."""

from __future__ import annotations

from functools import cache

import numpy as np

from tests.paths import ROOT
from traceql.analyzers.replay.activities import activities, on_clock
from traceql.analyzers.replay.deferred_cpu import moved_cpu
from traceql.analyzers.replay.graph import CHAIN, RunGraph, build
from traceql.analyzers.replay.scenarios import gradient_allreduces
from traceql.labelling.inputs import read_timeline
from traceql.validation.matrix import load_matrix


@cache
def _graph() -> RunGraph:
    run = load_matrix(ROOT / "datasets" / "library").run("twotower-2g-cap25-alt-r3")
    tl = read_timeline(run.path())
    return build(on_clock(activities(tl.kernels, tl.memops, tl.ranks)), tl.waits)


def test_the_cpu_time_moves_to_the_end_of_its_step_and_none_is_lost() -> None:
    rg = _graph()
    g, n = rg.graph, rg.n_ops
    deferred = gradient_allreduces(rg)
    moved = moved_cpu(rg, g.pred_lag, deferred)
    node = np.repeat(np.arange(g.n), np.diff(g.pred_ptr))
    chain = (rg.edge_kind == CHAIN) & (node >= n)
    assert np.array_equal(moved[~chain], g.pred_lag[~chain])  # only the CPU's own time between calls
    step = rg.ops["step"].fill_null(-1).to_numpy()[rg.launch_op]
    rank = rg.ops["rank"].to_numpy()[rg.launch_op]
    key = rank[node[chain] - n] * 100 + step[node[chain] - n]
    for k in np.unique(key):  # each rank's step keeps its CPU time, moved within it
        assert moved[chain][key == k].sum() == g.pred_lag[chain][key == k].sum()
    launches = rg.launch_of[deferred]
    delta = moved - g.pred_lag
    assert np.isin(g.pred_idx[delta < 0], launches).all()  # taken from the call after an all-reduce's launch ...
    assert np.isin(node[delta > 0], launches).all()  # ... and put before the launch of its step's last one
    assert delta[delta > 0].sum() > 8 * 1_000_000  # 8 steps x 2 ranks: about 1 ms a stock step, 0.5 a serialized


def test_a_run_without_deferred_all_reduces_is_left_as_it_is() -> None:
    rg = _graph()
    none = np.zeros(rg.n_ops, bool)
    assert moved_cpu(rg, rg.graph.pred_lag, none) is rg.graph.pred_lag
