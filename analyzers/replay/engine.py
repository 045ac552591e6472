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

    @property
    def n(self) -> int:
        return len(self.base)


@dataclass
class Replayed:
    start: np.ndarray
    end: np.ndarray
    forced: int  # nodes released to break a cycle (0 for a graph without one)


def replay(g: Graph, part: np.ndarray | None = None, fixed: Replayed | None = None) -> Replayed:
    """Every node's start and end (module doc). With ``part`` (per node; -1: not replayed) and ``fixed`` (a
    replay of the same nodes), each part is replayed on its own: a node's predecessors in another part (or in
    none) count with their ``fixed`` end, and a node in none keeps its ``fixed`` times."""
    n = g.n
    part_l = [0] * n if part is None else part.tolist()
    fixed_start = [0] * n if fixed is None else fixed.start.tolist()
    fixed_end = [0] * n if fixed is None else fixed.end.tolist()
    base, dur, group, tail = g.base.tolist(), g.dur.tolist(), g.group.tolist(), g.tail.tolist()
    ptr, idx, lag = g.pred_ptr.tolist(), g.pred_idx.tolist(), g.pred_lag.tolist()
    succ_ptr, succ_idx = _successors(g)
    succ_ptr_l, succ_idx_l = succ_ptr.tolist(), succ_idx.tolist()
    live = [part_l[idx[k]] == part_l[i] for i in range(n) for k in range(ptr[i], ptr[i + 1])]
    waiting = [0] * n  # predecessors of its own part not yet ended
    for i in range(n):
        waiting[i] = sum(live[ptr[i]:ptr[i + 1]])
    members: dict[int, list[int]] = {}
    for i, grp in enumerate(group):
        if grp >= 0 and part_l[i] >= 0:
            members.setdefault(grp, []).append(i)
    to_start = {grp: len(m) for grp, m in members.items()}
    start, end = list(fixed_start), list(fixed_end)
    active = [p >= 0 for p in part_l]
    started, done = [not a for a in active], [not a for a in active]
    ready = [i for i in range(n) if active[i] and waiting[i] == 0]
    forced, cursor = 0, 0
    order = g.order.tolist()

    def release(i: int) -> None:
        done[i] = True
        for s in succ_idx_l[succ_ptr_l[i]:succ_ptr_l[i + 1]]:
            if part_l[s] == part_l[i]:
                waiting[s] -= 1
                if waiting[s] == 0:
                    ready.append(s)

    def finish_group(grp: int) -> None:
        last = max(start[m] for m in members[grp])
        for m in members[grp]:
            end[m] = max(start[m], last + tail[m])
        for m in members[grp]:
            release(m)

    remaining = sum(active)
    while remaining:
        if not ready:  # a cycle: the earliest node in the trace not yet started goes first
            while started[order[cursor]]:
                cursor += 1
            ready.append(order[cursor])
            forced += 1
        i = ready.pop()
        if started[i]:
            continue
        t = base[i]
        for k in range(ptr[i], ptr[i + 1]):
            p = idx[k]
            if not live[k]:
                t = max(t, fixed_end[p] + lag[k])
            elif done[p]:
                t = max(t, end[p] + lag[k])
        start[i], started[i] = t, True
        remaining -= 1
        grp = group[i]
        if grp < 0 or part_l[i] < 0:
            end[i] = t + dur[i]
            release(i)
        else:
            to_start[grp] -= 1
            if to_start[grp] == 0:
                finish_group(grp)
    # members of a collective held back by a cycle: ended with what started
    for grp, left in to_start.items():
        if left > 0:
            for m in members[grp]:
                if not done[m]:
                    end[m] = start[m] + dur[m]
    return Replayed(np.asarray(start, np.int64), np.asarray(end, np.int64), forced)


def _successors(g: Graph) -> tuple[np.ndarray, np.ndarray]:
    """The CSR of each node's successors (the nodes that list it as a predecessor)."""
    counts = np.diff(g.pred_ptr)
    owner = np.repeat(np.arange(g.n), counts)
    order = np.argsort(g.pred_idx, kind="stable")
    succ_idx = owner[order]
    succ_ptr = np.zeros(g.n + 1, np.int64)
    np.cumsum(np.bincount(g.pred_idx, minlength=g.n), out=succ_ptr[1:])
    return succ_ptr, succ_idx
