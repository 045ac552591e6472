"""The replay's longest-path passes over arrays — in trace order, and a lane at a time — compiled with numba
for graphs large enough that the pure-Python loop dominates (at 1.8 million kernels it took 3.5 s a replay;
compiled, a few tens of milliseconds); a smaller graph runs the same functions in Python.

numba compiles the function the first time a process calls it and caches the machine code on disk (in
``$NUMBA_CACHE_DIR``, by default ``~/.cache/traceql/numba``), so that later processes load it in a fraction
of a second; a small graph never imports numba at all (``COMPILED_NODES``).
"""

from __future__ import annotations

import os
import threading
import types
from pathlib import Path
from typing import Any

import numpy as np

COMPILED_NODES = 200_000  # nodes replayed at once from which the compiled pass is worth its import
_COMPILED: dict[str, Any] = {}
_COMPILING = threading.Lock()  # windows replayed on threads (``windows``) make each function once


def wanted(nodes: int) -> bool:
    """Whether to replay ``nodes`` nodes with the compiled passes: a large graph, or any once they are loaded."""
    return nodes >= COMPILED_NODES or bool(_COMPILED)


def _pass(fn: Any, compiled: bool) -> Any:
    """``fn`` compiled (numba imported and the function compiled, or loaded from its cache, once), or as it is.
    The passes call :func:`_started`: compiled, they call it compiled (it is compiled first and given to them)."""
    if not compiled:
        return fn
    with _COMPILING:
        return _compiled(fn)


def _compiled(fn: Any) -> Any:
    if fn.__name__ not in _COMPILED:
        os.environ.setdefault("NUMBA_CACHE_DIR", str(Path.home() / ".cache" / "traceql" / "numba"))
        import numba

        jit = numba.njit(cache=True, nogil=True)
        if "_started" not in _COMPILED:
            _COMPILED["_started"] = jit(_started)
        own = types.FunctionType(fn.__code__, {**fn.__globals__, "_started": _COMPILED["_started"]}, fn.__name__)
        _COMPILED[fn.__name__] = jit(own)
    return _COMPILED[fn.__name__]


def _started(i: int, t: int, grp: int, tail: np.ndarray, left: np.ndarray, g_ptr: np.ndarray,  # noqa: PLR0913
             g_nodes: np.ndarray, start: np.ndarray, end: np.ndarray, done: np.ndarray) -> None:
    """Node ``i``, a member of collective ``grp``, starts at ``t``; once the last member has started (``left``:
    each collective's members yet to start; CSR ``g_ptr``, ``g_nodes``), every member ends ``tail`` after the
    last one's start (none before its own start). A node of no collective the passes end themselves, ``dur``
    after its start: a call costs tens of nanoseconds (its arrays' references counted), more than such a
    node's own work, and most nodes are of none."""
    start[i] = t
    left[grp] -= 1
    if left[grp] == 0:
        last = start[g_nodes[g_ptr[grp]]]
        for k in range(g_ptr[grp], g_ptr[grp + 1]):
            if start[g_nodes[k]] > last:
                last = start[g_nodes[k]]
        for k in range(g_ptr[grp], g_ptr[grp + 1]):
            j = g_nodes[k]
            end[j] = max(start[j], last + tail[j])
            done[j] = True


def _groups(group: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each node's collective numbered densely (-1: none), and the members of each (CSR: pointers, nodes)."""
    members = np.flatnonzero(group >= 0)
    ids, dense = np.unique(group[members], return_inverse=True)
    by_group = members[np.argsort(dense, kind="stable")].astype(np.int64)
    g_ptr = np.zeros(len(ids) + 1, np.int64)
    np.cumsum(np.bincount(dense, minlength=len(ids)), out=g_ptr[1:])
    local = np.full(len(group), -1, np.int64)
    local[members] = dense
    return local, g_ptr, by_group


def _i64(*arrays: np.ndarray) -> list[np.ndarray]:
    return [np.asarray(a, np.int64) for a in arrays]


def in_trace_order(floor: np.ndarray, dur: np.ndarray, group: np.ndarray, tail: np.ndarray, in_ptr: np.ndarray,
                   in_src: np.ndarray, in_lag: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Every node's start and end (local numbering): each starts at ``floor`` or at its predecessors' ends plus
    lags (CSR: ``in_ptr``, ``in_src``, ``in_lag``), whichever is latest, the nodes taken in ``order``; a
    collective's members (``group`` >= 0) end together, each ``tail`` after the last one's start. None where
    ``order`` does not put every predecessor first (or every member of a collective before what follows one)."""
    return by_lanes(floor, dur, group, tail, in_ptr, in_src, in_lag, [np.asarray(order, np.int64)])


def in_place(g: Any, order: np.ndarray, part: np.ndarray, active: np.ndarray, start: np.ndarray, end: np.ndarray,
             fixed_end: np.ndarray | None) -> bool:
    """The pass over the graph ``g`` itself (``engine.Graph``), no copy of its edges: the ``active`` nodes taken in
    ``order`` (the trace's), each part on its own (a predecessor in another part, or not active, counts with its
    ``fixed_end``; none where that is None), ``start`` and ``end`` set in place. False where that order does not
    put a live predecessor first (or a member of a collective before what follows one): then ``start``/``end``
    of active nodes hold nothing meaningful and the caller replays them another way."""
    walk = order[active[order]].astype(np.int64)
    return in_lanes(g, walk, np.array([0, len(walk)], np.int64), part, active, start, end, fixed_end)


def in_lanes(g: Any, walk: np.ndarray, l_ptr: np.ndarray, part: np.ndarray, active: np.ndarray, start: np.ndarray,
             end: np.ndarray, fixed_end: np.ndarray | None) -> bool:
    """:func:`in_place`'s pass with the nodes ``walk`` in lanes (``l_ptr``: where each begins), each taken in its
    order, going on to the next lane where one waits for a node not yet done (a collective whose members on other
    lanes have not started); False where every lane waits."""
    n_groups = int(g.group.max()) + 1 if len(g.group) else 0  # the pass counts the active members itself
    fixed = fixed_end if fixed_end is not None else np.zeros(1, np.int64)
    return bool(_pass(_lanes_pass, wanted(len(walk)))(
        walk, l_ptr, *_i64(g.base, g.dur, g.pred_ptr, g.pred_idx, g.pred_lag, part, g.group, g.tail, fixed),
        active, fixed_end is not None, n_groups, start, end))


def bound_edges(total: int, node: np.ndarray, pred: np.ndarray, lag: np.ndarray, start: np.ndarray,
                end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``graph._bound``'s edges, compiled: their order by node then predecessor (stable), the pointers of each
    node's edges, the predecessors in that order and each edge's lag as the trace shows it (the first edge
    that reaches a node's latest constraint: the gap measured after it; the others no more than their lag)."""
    return _pass(_bound_pass, True)(total, *_i64(node, pred, lag, start, end))


def _bound_pass(total: int, node: np.ndarray, pred: np.ndarray, lag: np.ndarray, start: np.ndarray,
                end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    ptr = np.zeros(total + 1, np.int64)
    for e in range(node.shape[0]):
        ptr[node[e] + 1] += 1
    for v in range(total):
        ptr[v + 1] += ptr[v]
    fill = ptr[:-1].copy()
    order = np.empty(node.shape[0], np.int64)
    for e in range(node.shape[0]):
        order[fill[node[e]]] = e
        fill[node[e]] += 1
    out_pred = np.empty(node.shape[0], np.int64)
    out_lag = np.empty(node.shape[0], np.int64)
    for v in range(total):
        a, b = ptr[v], ptr[v + 1]
        for k in range(a + 1, b):  # a node's few edges by predecessor, ties as they came
            x = order[k]
            j = k - 1
            while j >= a and pred[order[j]] > pred[x]:
                order[j + 1] = order[j]
                j -= 1
            order[j + 1] = x
        first = a
        best = 0
        for k in range(a, b):
            x = order[k]
            value = end[pred[x]] + min(lag[x], start[v] - end[pred[x]])
            if k == a or value > best:
                best = value
                first = k
        for k in range(a, b):
            x = order[k]
            gap = start[v] - end[pred[x]]
            out_pred[k] = pred[x]
            out_lag[k] = gap if k == first else min(lag[x], gap)
    return order, ptr, out_pred, out_lag


def by_lanes(floor: np.ndarray, dur: np.ndarray, group: np.ndarray, tail: np.ndarray, in_ptr: np.ndarray,
             in_src: np.ndarray, in_lag: np.ndarray, lanes: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray] | None:
    """Every node's start and end (local numbering): each starts at ``floor`` or at its predecessors' ends plus
    lags (CSR: ``in_ptr``, ``in_src``, ``in_lag``), whichever is latest, a lane at a time, each in its own order
    (``lanes``; one lane: the trace's order), going on to the next lane where one waits for a collective whose
    members on other lanes have not started; a collective's members (``group`` >= 0) end together, each ``tail``
    after the last one's start. None where every lane waits (a cycle, or an order that does not serve)."""
    m = len(floor)
    local, g_ptr, _ = _groups(group)
    l_ptr = np.zeros(len(lanes) + 1, np.int64)
    np.cumsum([len(x) for x in lanes], out=l_ptr[1:])
    walk = np.concatenate(lanes).astype(np.int64) if lanes else np.zeros(0, np.int64)
    start, end = np.zeros(m, np.int64), np.zeros(m, np.int64)
    ok = _pass(_lanes_pass, wanted(m))(walk, l_ptr, *_i64(floor, dur, in_ptr, in_src, in_lag, np.zeros(m), local,
                                                          tail, np.zeros(1)), np.ones(m, np.bool_), False,
                                       len(g_ptr) - 1, start, end)
    return (start, end) if ok else None


def _lanes_pass(walk: np.ndarray, l_ptr: np.ndarray, base: np.ndarray, dur: np.ndarray,  # noqa: PLR0913
                ptr: np.ndarray, idx: np.ndarray, lag: np.ndarray, part: np.ndarray, group: np.ndarray,
                tail: np.ndarray, fixed: np.ndarray, active: np.ndarray, has_fixed: bool, n_groups: int,
                start: np.ndarray, end: np.ndarray) -> bool:
    """Every pass: the nodes of ``walk`` a lane at a time (``l_ptr``), each part on its own (a predecessor in
    another part, or not ``active``, at its ``fixed`` end where ``has_fixed``); False where every lane waits."""
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
