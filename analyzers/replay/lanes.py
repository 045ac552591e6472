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

from traceql.analyzers.replay.compiled import in_lanes


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
    l_ptr = np.r_[0, np.flatnonzero(np.diff(lane[walk])) + 1, len(walk)].astype(np.int64)
    return in_lanes(g, walk, l_ptr, part, active, start, end, fixed_end)
