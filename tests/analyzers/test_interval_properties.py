"""Properties of the interval arithmetic every overlap figure stands on, over generated intervals (hypothesis):
0 <= overlap <= duration, the same as a brute-force count, the same whatever the order of the input."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.oracle import union_overlap
from traceql.analyzers.intervals import intersection_length, merge, overlap_with_union, overlapping_pairs, union_length

interval = st.tuples(st.integers(-10**6, 10**6), st.integers(0, 10**5)).map(lambda t: (t[0], t[0] + t[1]))
intervals = st.lists(interval, max_size=60)


def arrays(items: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    return (np.array([a for a, _ in items], np.int64), np.array([b for _, b in items], np.int64))


@settings(max_examples=300, deadline=None)
@given(comm=intervals, kernels=intervals, seed=st.integers(0, 2**32 - 1))
def test_overlap_is_bounded_exact_and_order_free(comm, kernels, seed) -> None:
    us, ue = merge(*arrays(comm))
    assert (us[1:] > ue[:-1]).all() and (ue >= us).all()  # sorted, disjoint
    a, b = arrays(kernels)
    got = overlap_with_union(us, ue, a, b)
    assert ((got >= 0) & (got <= b - a)).all()
    assert got.tolist() == [union_overlap(x, y, comm) for x, y in kernels]
    shuffled = list(comm)
    np.random.default_rng(seed).shuffle(shuffled)
    assert overlap_with_union(*merge(*arrays(shuffled)), a, b).tolist() == got.tolist()


@settings(max_examples=300, deadline=None)
@given(first=intervals, second=intervals)
def test_intersection_is_symmetric_and_within_each_union(first, second) -> None:
    both = intersection_length(*arrays(first), *arrays(second))
    assert both == intersection_length(*arrays(second), *arrays(first))
    assert 0 <= both <= min(union_length(*arrays(first)), union_length(*arrays(second)))


@settings(max_examples=300, deadline=None)
@given(a=intervals, b=intervals)
def test_overlapping_pairs_are_every_intersecting_pair(a, b) -> None:
    b = sorted(b)
    i, j, length = overlapping_pairs(*arrays(a), *arrays(b))
    want = sorted((x, y, min(a[x][1], b[y][1]) - max(a[x][0], b[y][0])) for x in range(len(a)) for y in range(len(b))
                  if b[y][0] < a[x][1] and b[y][1] > a[x][0])
    assert sorted(zip(i.tolist(), j.tolist(), length.tolist(), strict=True)) == want


kinded = st.lists(st.tuples(interval, st.sampled_from(["compute", "comm", "memcpy", "memset"])), min_size=1,
                  max_size=60)


def covered(items: list[tuple[tuple[int, int], str]], kinds: set[str]) -> set[int]:
    """Brute force: the integer instants the intervals of these kinds cover."""
    return {t for (a, b), k in items if k in kinds for t in range(a, b)}


@settings(max_examples=200, deadline=None)
@given(items=kinded, cuts=st.lists(st.integers(1, 59), max_size=5))
def test_breakdown_read_a_batch_at_a_time_is_the_brute_force_count(items, cuts) -> None:
    """The per-rank breakdown from the activity in start order, cut into batches anywhere (a rank too large to
    hold is read so), counts each instant once: the same figures as counting the instants covered."""
    from traceql.analyzers.breakdown import KIND_CODES, rank_breakdown_batches

    items = sorted(items, key=lambda it: it[0][0])
    starts, ends = arrays([i for i, _ in items])
    codes = np.array([KIND_CODES[k] for _, k in items], np.uint8)
    bounds = [0, *sorted({c for c in cuts if c < len(items)}), len(items)]
    batches = [(starts[a:b], ends[a:b], codes[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]
    row = rank_breakdown_batches([("run", 0, batches)]).row(0, named=True)
    compute, comm = covered(items, {"compute"}), covered(items, {"comm"})
    busy = covered(items, {"compute", "comm", "memcpy", "memset"})
    assert row["span_ns"] == int(ends.max() - starts.min())
    assert row["busy_ns"] == len(busy) and row["idle_ns"] == row["span_ns"] - len(busy)
    assert row["compute_ns"] == len(compute) and row["comm_ns"] == len(comm)
    assert row["memory_ns"] == len(covered(items, {"memcpy", "memset"}))
    assert row["comm_compute_overlap_ns"] == len(compute & comm)
    assert row["non_compute_ns"] == len(busy - compute)
