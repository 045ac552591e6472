"""The replay's pass over a graph that knows an order of each lane (``engine.Graph.lane``/``lane_place``: the
serialized what-ifs, where each rank runs its activities one at a time), over the graph itself: the nodes of a
lane taken in that order, going on to the next lane where one waits for a node not yet done (a collective whose
members on other lanes have not started), each part on its own as ``compiled.in_place`` takes them. The trace's
order does not serve such a graph (its activities run in another order), and a copy of its edges a batch at a
time (``engine``) costs several times the pass itself.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from traceql.analyzers.replay import compiled
from traceql.analyzers.replay.compiled import _i64, _pass, _started


def by_lane_order(g: Any, part: np.ndarray, active: np.ndarray, start: np.ndarray, end: np.ndarray,
                  fixed_end: np.ndarray | None) -> bool:
    """The ``active`` nodes of ``g`` (``engine.Graph`` with its lanes) replayed a lane at a time, each in its
    order, each part on its own (a predecessor in another part, or not active, counts with its ``fixed_end``;
    none where that is None), ``start`` and ``end`` set in place. False where every lane waits (a cycle): then
    ``start``/``end`` of active nodes hold nothing meaningful and the caller replays them another way."""
    lane, place = np.asarray(g.lane, np.int64), np.asarray(g.lane_place, np.int64)
    by_place = np.empty(len(place), np.int64)
    by_place[place] = np.arange(len(place))  # the nodes in their places' order (a permutation)
    by_place = by_place[active[by_place]]
    walk = by_place[np.argsort(lane[by_place], kind="stable")]  # a lane after another, each in its order
    cuts = np.flatnonzero(np.diff(lane[walk])) + 1
    l_ptr = np.r_[0, cuts, len(walk)].astype(np.int64)
    members = active & (g.group >= 0)
    n_groups = int(g.group.max()) + 1 if members.any() else 0
    fixed = fixed_end if fixed_end is not None else np.zeros(1, np.int64)
    return bool(_pass(_lanes_in_place, compiled.wanted(len(walk)))(
        walk, l_ptr, *_i64(g.base, g.dur, g.pred_ptr, g.pred_idx, g.pred_lag, part, g.group, g.tail, fixed), active,
        fixed_end is not None, n_groups, start, end))


def _lanes_in_place(walk: np.ndarray, l_ptr: np.ndarray, base: np.ndarray, dur: np.ndarray,  # noqa: PLR0913
                    ptr: np.ndarray, idx: np.ndarray, lag: np.ndarray, part: np.ndarray, group: np.ndarray,
                    tail: np.ndarray, fixed: np.ndarray, active: np.ndarray, has_fixed: bool, n_groups: int,
                    start: np.ndarray, end: np.ndarray) -> bool:
    n = base.shape[0]
    done = np.zeros(n, np.bool_)
    left = np.zeros(n_groups, np.int64)  # each collective's active members not yet started, then their list
    for i in walk:
        if group[i] >= 0:
            left[group[i]] += 1
    g_ptr = np.zeros(n_groups + 1, np.int64)
    for grp in range(n_groups):
        g_ptr[grp + 1] = g_ptr[grp] + left[grp]
    fill = g_ptr[:-1].copy()
    g_nodes = np.zeros(g_ptr[n_groups], np.int64)
    for i in walk:
        grp = group[i]
        if grp >= 0:
            g_nodes[fill[grp]] = i
            fill[grp] += 1
    n_lanes = l_ptr.shape[0] - 1
    cursors = l_ptr[:-1].copy()
    moved = True
    while moved:
        moved = False
        for li in range(n_lanes):
            c = cursors[li]
            stop = l_ptr[li + 1]
            while c < stop:
                i = walk[c]
                t = base[i]
                ready = True
                for k in range(ptr[i], ptr[i + 1]):
                    p = idx[k]
                    if active[p] and part[p] == part[i]:
                        if not done[p]:
                            ready = False
                            break
                        v = end[p] + lag[k]
                    elif has_fixed:
                        v = fixed[p] + lag[k]
                    else:
                        continue
                    if v > t:
                        t = v
                if not ready:
                    break
                if group[i] < 0:
                    start[i], end[i], done[i] = t, t + dur[i], True
                else:
                    _started(i, t, group[i], tail, left, g_ptr, g_nodes, start, end, done)
                c += 1
            if c != cursors[li]:
                cursors[li] = c
                moved = True
    for li in range(n_lanes):
        if cursors[li] < l_ptr[li + 1]:
            return False
    return True
