"""Interval arithmetic on sorted numpy arrays: unions and exact overlap lengths in O(n log n)."""

from __future__ import annotations

import numpy as np


def merge(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals [start, end) as sorted, disjoint (starts, ends)."""
    if len(starts) == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    order = np.argsort(starts, kind="stable")
    s, e = starts[order].astype(np.int64), ends[order].astype(np.int64)
    reach = np.maximum.accumulate(e)
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    return s[first], np.maximum.reduceat(e, first)


def covered_before(union_s: np.ndarray, union_e: np.ndarray, t: np.ndarray) -> np.ndarray:
    """For each time in ``t``, the length of the (disjoint, sorted) union that lies before it."""
    cum = np.concatenate([[0], np.cumsum(union_e - union_s)])
    i = np.searchsorted(union_s, t, side="right")
    if len(union_s) == 0:
        return np.zeros(len(t), np.int64)
    last_end = union_e[np.maximum(i - 1, 0)]
    beyond = np.where(i > 0, np.maximum(last_end - t, 0), 0)
    return cum[i] - beyond


def overlap_with_union(union_s: np.ndarray, union_e: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """For each interval [a, b), the length of its intersection with the union."""
    return covered_before(union_s, union_e, b) - covered_before(union_s, union_e, a)


def union_length(starts: np.ndarray, ends: np.ndarray) -> int:
    s, e = merge(starts, ends)
    return int((e - s).sum())


def intersection_length(s1: np.ndarray, e1: np.ndarray, s2: np.ndarray, e2: np.ndarray) -> int:
    """Length of (union of set 1) ∩ (union of set 2)."""
    u1s, u1e = merge(s1, e1)
    u2s, u2e = merge(s2, e2)
    return int(overlap_with_union(u2s, u2e, u1s, u1e).sum())


def overlapping_pairs(a_s: np.ndarray, a_e: np.ndarray, b_s: np.ndarray, b_e: np.ndarray,
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every pair (i, j) where interval a[i] and interval b[j] intersect (``b_s < a_e`` and ``b_e > a_s``),
    with the intersection's length (0 for an empty a[i] inside b[j]).

    ``b`` must be sorted by start. Work is O((n + m) log m + pairs): for each a[i], the candidates are the
    b[j] that start before a[i] ends and whose running maximum end reaches past a[i]'s start.
    """
    if len(a_s) == 0 or len(b_s) == 0:
        empty = np.empty(0, np.int64)
        return empty, empty, empty
    reach = np.maximum.accumulate(b_e)
    lo = np.searchsorted(reach, a_s, side="right")
    hi = np.searchsorted(b_s, a_e, side="left")
    count = np.maximum(hi - lo, 0)
    i = np.repeat(np.arange(len(a_s)), count)
    offsets = np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count)
    j = np.repeat(lo, count) + offsets
    keep = b_e[j] > a_s[i]
    i, j = i[keep], j[keep]
    return i, j, np.minimum(a_e[i], b_e[j]) - np.maximum(a_s[i], b_s[j])


def _spread(group: np.ndarray, starts: np.ndarray, ends: np.ndarray, base: int, width: int,
            ) -> tuple[np.ndarray, np.ndarray]:
    """Intervals moved group by group ``width`` apart (every group's intervals fit in ``width``), so that one
    union over all of them never joins two groups."""
    shift = group.astype(np.int64) * width - base
    return starts.astype(np.int64) + shift, ends.astype(np.int64) + shift


Grouped = tuple[np.ndarray, np.ndarray, np.ndarray]  # each interval's group (0..n-1), starts, ends


def grouped_lengths(intervals: Grouped, n_groups: int, other: Grouped | None = None) -> np.ndarray:
    """Per group 0..n_groups-1: the length of the union of its intervals; with ``other`` (another set), the
    length of the two unions' intersection, group by group."""
    sets = [intervals] + ([other] if other is not None else [])
    alls = [a for _, s, e in sets for a in (s, e) if len(a)]
    if not alls:
        return np.zeros(n_groups, np.int64)
    base = min(int(a.min()) for a in alls)
    width = max(int(a.max()) for a in alls) - base + 1
    us, ue = merge(*_spread(*intervals, base, width))
    if other is not None:
        os_, oe = merge(*_spread(*other, base, width))
        lengths = overlap_with_union(os_, oe, us, ue)
    else:
        lengths = ue - us
    return np.bincount(us // width, weights=lengths, minlength=n_groups).astype(np.int64)
