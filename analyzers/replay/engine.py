"""The replay itself: the earliest time every node of a dependency graph can start and end (a longest-path pass
in dependency order).

A node is a GPU activity (a kernel, a copy, a set) or a CPU launch call. Each node ``i`` starts at the latest of
its ``base`` (a fixed time: the first launch of a rank, or an activity nothing else explains) and, for each
predecessor ``p``, ``end[p] + lag``; it ends ``dur`` later, unless it is a member of a collective: the
members of one collective (one kernel a rank) end together, each ``tail`` after the last member's start (the
collective cannot finish before every rank has arrived). The graph may hold a cycle only where a what-if
contradicts the trace (say, two ranks each waiting for the other): its nodes are then released one by one in
the order they started in the trace, and counted.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from traceql.analyzers.replay.compiled import by_lanes, in_lanes, in_place, in_trace_order

NEVER = np.iinfo(np.int64).min // 4  # no lower bound


@dataclass
class Graph:
    """Nodes ``0 .. n-1`` with their predecessors in CSR form (``pred_ptr``, ``pred_idx``, ``pred_lag``), fixed
    lower bounds ``base`` (:data:`NEVER` for none), durations ``dur``; ``group`` the collective of a node (-1:
    none) and ``tail`` its end after the collective's last start; ``order`` the nodes in the order they
    started in the trace (how a cycle is broken)."""

    base: np.ndarray
    dur: np.ndarray
    pred_ptr: np.ndarray
    pred_idx: np.ndarray
    pred_lag: np.ndarray
    group: np.ndarray
    tail: np.ndarray
    order: np.ndarray
    # where known, each node's lane (its rank) and its place in an order of its lane that puts every predecessor
    # of its own lane first (where the trace's order does not do that for the graph: a what-if's)
    lane: np.ndarray | None = None
    lane_place: np.ndarray | None = None

    @property
    def n(self) -> int:
        return len(self.base)


@dataclass
class Replayed:
    start: np.ndarray
    end: np.ndarray
    forced: int  # nodes released to break a cycle (0 for a graph without one)


BATCH = 250_000  # nodes replayed at once, where parts let them be taken apart (their lists: about 100 B a node)


def replay(g: Graph, part: np.ndarray | None = None, fixed: Replayed | None = None,
           only: np.ndarray | None = None) -> Replayed:
    """Every node's start and end (module doc). With ``part`` (per node; -1: not replayed) and ``fixed`` (a
    replay of the same nodes), each part is replayed on its own: a node's predecessors in another part (or in
    none) count with their ``fixed`` end, and a node in none keeps its ``fixed`` times; ``only``: the parts to
    replay (the others keep their ``fixed`` times too). Parts are replayed :data:`BATCH` nodes at a time."""
    n = g.n
    part = np.zeros(n, np.int64) if part is None else part
    active = part >= 0
    if only is not None:
        active &= np.isin(part, only)
    start = np.zeros(n, np.int64) if fixed is None else fixed.start.copy()
    end = np.zeros(n, np.int64) if fixed is None else fixed.end.copy()
    fixed_end = None if fixed is None else fixed.end
    if g.lane is not None and g.lane_place is not None:  # each rank's order known (a serialized what-if's)
        if in_lanes(g, *_lane_walk(g, active), part, active, start, end, fixed_end):
            return Replayed(start, end, 0)
    elif in_place(g, g.order, part, active, start, end, fixed_end):
        return Replayed(start, end, 0)  # the trace's order served: no cycle, no batch
    forced = 0
    pos = np.empty(n, np.int64)  # each node's place in the order the nodes started in the trace
    pos[g.order] = np.arange(n)
    batches = _batches(part, active)
    local = np.full(n, -1, np.int64)  # each replayed node's number in its batch
    for batch in batches:
        local[batch] = np.arange(len(batch))
    for batch in batches:
        forced += _replay_nodes(g, part, batch, start, end, fixed_end, pos, local)
    return Replayed(start, end, forced)


def _lane_walk(g: Graph, active: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The ``active`` nodes of a graph that knows each lane's order (``lane``, ``lane_place``: each rank runs its
    activities one at a time, not in the trace's order), a lane after another, each in its order, and where each
    lane begins: the pass over the graph itself (a copy of its edges a batch at a time costs several times it)."""
    lane, place = np.asarray(g.lane, np.int64), np.asarray(g.lane_place, np.int64)
    by_place = np.empty(len(place), np.int64)
    by_place[place] = np.arange(len(place))  # the nodes in their places' order (a permutation)
    by_place = by_place[active[by_place]]
    walk = by_place[np.argsort(lane[by_place], kind="stable")]
    return walk, np.r_[0, np.flatnonzero(np.diff(lane[walk])) + 1, len(walk)].astype(np.int64)


def _batches(part: np.ndarray, active: np.ndarray) -> list[np.ndarray]:
    """The active nodes, whole parts together, about :data:`BATCH` nodes a batch."""
    nodes = np.flatnonzero(active)
    if len(nodes) <= BATCH:
        return [nodes] if len(nodes) else []
    nodes = nodes[np.argsort(part[nodes], kind="stable")]  # each part's nodes in their order
    cuts = np.flatnonzero(np.diff(part[nodes])) + 1  # where a part begins
    out, lo = [], 0
    for c in [*cuts.tolist(), len(nodes)]:
        if c - lo >= BATCH or c == len(nodes):
            out.append(nodes[lo:c])
            lo = c
    return out


def _replay_nodes(g: Graph, part: np.ndarray, nodes: np.ndarray, start: np.ndarray, end: np.ndarray,
                  fixed_end: np.ndarray | None, pos: np.ndarray, local: np.ndarray) -> int:
    """Replay ``nodes`` (whole parts, in any order), their other predecessors at ``fixed_end``; ``start``/``end``
    updated in place (``pos``: each node's place in the trace's order; ``local``: each replayed node's number
    in its batch); the nodes released to break a cycle."""
    # the edges into replayed nodes: live (from a node replayed in the same part) or fixed (folded in now)
    counts = np.diff(g.pred_ptr)[nodes]
    edge = np.repeat(g.pred_ptr[nodes], counts) + (np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts,
                                                                                        counts))
    owner = np.repeat(np.arange(len(nodes)), counts)  # sorted: the edges of each node in turn
    pred, lag = g.pred_idx[edge], g.pred_lag[edge]
    at = np.clip(local[pred], 0, len(nodes) - 1)  # a predecessor's number in this batch, where it is in it
    live = (local[pred] >= 0) & (part[pred] == part[nodes[owner]]) & (nodes[at] == pred)
    floor = g.base[nodes].copy()
    dead = ~live
    if fixed_end is not None and dead.any():  # the fixed ends, not an earlier batch's (each part on its own)
        np.maximum.at(floor, owner[dead], fixed_end[pred[dead]] + lag[dead])
    src, dst, lag_l = at[live], owner[live], lag[live]
    # dst is sorted already: the edges grouped by the node they go into
    in_ptr = np.zeros(len(nodes) + 1, np.int64)
    np.cumsum(np.bincount(dst, minlength=len(nodes)), out=in_ptr[1:])
    by_src = np.argsort(src, kind="stable")
    out_ptr = np.zeros(len(nodes) + 1, np.int64)
    np.cumsum(np.bincount(src, minlength=len(nodes)), out=out_ptr[1:])
    trace_order = np.argsort(pos[nodes], kind="stable")  # local numbers in the order they started in the trace
    group = g.group[nodes]
    arrays = (floor, g.dur[nodes], group, g.tail[nodes], in_ptr, src, lag_l)
    got = in_trace_order(*arrays, trace_order)  # None where the trace's order does not serve
    if got is None and g.lane is not None and g.lane_place is not None:
        by_lane = np.lexsort((g.lane_place[nodes], g.lane[nodes]))
        got = by_lanes(*arrays, np.split(by_lane, np.flatnonzero(np.diff(g.lane[nodes][by_lane])) + 1))
    got_start: np.ndarray | list[int]
    got_end: np.ndarray | list[int]
    if got is not None:
        got_start, got_end = got
        forced = 0
    else:
        got_start, got_end, forced = _kahn(
            floor.tolist(), g.dur[nodes].tolist(), group.tolist(), g.tail[nodes].tolist(), in_ptr.tolist(),
            src.tolist(), lag_l.tolist(), out_ptr.tolist(), dst[by_src].tolist(), trace_order.tolist())
    start[nodes], end[nodes] = got_start, got_end
    return forced


def _kahn(floor: list, dur: list, group: list, tail: list, in_ptr: list, in_src: list, in_lag: list,
          out_ptr: list, out_dst: list, order: list) -> tuple[list, list, int]:
    """The longest-path pass over ``m`` nodes (local numbering) in dependency order (Kahn's algorithm): each
    starts at ``floor`` or its predecessors' ends plus lags, whichever is latest."""
    m = len(floor)
    waiting = [in_ptr[i + 1] - in_ptr[i] for i in range(m)]
    start, end = [0] * m, [0] * m
    started, done = [False] * m, [False] * m
    members: dict[int, list[int]] = {}
    for i, grp in enumerate(group):
        if grp >= 0:
            members.setdefault(grp, []).append(i)
    to_start = {grp: len(v) for grp, v in members.items()}
    ready = [i for i in range(m) if not waiting[i]]
    released: list[int] = []
    forced = cursor = 0
    left = m
    while left:
        if not ready:  # a cycle: the earliest node in the trace not yet started goes first
            while started[order[cursor]]:
                cursor += 1
            ready.append(order[cursor])
            forced += 1
        i = ready.pop()
        if started[i]:
            continue
        t = floor[i]
        for k in range(in_ptr[i], in_ptr[i + 1]):
            p = in_src[k]
            if done[p]:
                v = end[p] + in_lag[k]
                if v > t:
                    t = v
        start[i] = t
        started[i] = True
        left -= 1
        grp = group[i]
        if grp < 0:
            end[i] = t + dur[i]
            released.append(i)
        else:
            to_start[grp] -= 1
            if not to_start[grp]:
                mine = members[grp]
                last = max(start[j] for j in mine)
                for j in mine:
                    end[j] = max(start[j], last + tail[j])
                released += mine
        while released:
            j = released.pop()
            done[j] = True
            for k in range(out_ptr[j], out_ptr[j + 1]):
                s = out_dst[k]
                waiting[s] -= 1
                if not waiting[s]:
                    ready.append(s)
    for grp, missing in to_start.items():  # members of a collective held back by a cycle: as they started
        if missing:
            for j in members[grp]:
                if not done[j]:
                    end[j] = start[j] + dur[j]
    return start, end, forced
