"""Overlap and twin labels equal an independent brute-force computation on real traces."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tests.oracle import overlaps, read_kernels, twin_labels, union_overlap
from tests.paths import DDP_TRACE, NSYS, SINGLE_TRACE, corpus
from traceql.analyzers.intervals import intersection_length, merge, overlap_with_union
from traceql.commands.detect import detect

PAIRS = [(DDP_TRACE, SINGLE_TRACE)] + [
    corpus(NSYS / f"{m}_ddp2_{c}.sqlite", NSYS / f"{m}_single.sqlite", id=f"{m}_ddp2_{c}")
    for m in ("toy", "gpt2") for c in ("cap25", "cap2")
]
SLICE = 1500  # compute kernels per trace checked one by one


@pytest.mark.parametrize("trace,iso", PAIRS, ids=lambda p: p.stem)
def test_overlap_and_twin_labels_match_brute_force(trace: Path, iso: Path) -> None:
    result = detect(trace, baseline=[iso]).kernels
    assert result["label_source"].unique().to_list() == ["baseline"]
    kernels = read_kernels(trace)
    compute = sorted((k for k in kernels if not k["comm"]), key=lambda k: (k["start"], k["device"], k["end"]))
    assert result.height == len(compute)
    # a slice from the middle of the capture, where backward compute meets the all-reduces
    mid = len(compute) // 2
    part = compute[mid: mid + SLICE]
    want_overlap = overlaps(kernels, part)
    got = result.sort(["start_ns", "device", "end_ns"]).slice(mid, SLICE)
    assert got["start_ns"].to_list() == [k["start"] for k in part]
    assert got["comm_overlap_ns"].to_list() == want_overlap
    assert sum(want_overlap) > 0  # the slice does contain overlap
    # every kernel's twin baseline and label, against the brute-force twin definition
    twins = twin_labels(trace, iso)
    got_all = dict(zip(zip(result["device"].to_list(), result["start_ns"].to_list(), strict=True),
                       zip(result["baseline_ns"].to_list(), result["is_slowdown"].to_list(), strict=True),
                       strict=True))
    assert got_all == twins
    assert sum(bool(case) for _, case in twins.values()) > 0


def test_whole_trace_case_count_matches_definition() -> None:
    twins = twin_labels(DDP_TRACE, SINGLE_TRACE)
    got = detect(DDP_TRACE, baseline=[SINGLE_TRACE])
    assert int(got.kernels["is_slowdown"].sum()) == sum(bool(case) for _, case in twins.values())
    kernels = read_kernels(DDP_TRACE)
    assert int(got.kernels["comm_overlap_ns"].sum()) == sum(overlaps(kernels, [k for k in kernels if not k["comm"]]))
    assert sum(r["cases"] for r in got.to_dict()["ranks"]) == int(got.kernels["is_slowdown"].sum())


def test_concurrent_comm_is_the_most_overlapping_collective() -> None:
    res = detect(DDP_TRACE, baseline=[SINGLE_TRACE]).kernels
    overlapped = res.filter(pl.col("comm_overlap_ns") > 0)
    assert overlapped["concurrent_comm"].null_count() == 0
    assert set(overlapped["concurrent_comm"].unique()) == {"AllReduce/RING/LL"}
    assert res.filter(pl.col("comm_overlap_ns") == 0)["concurrent_comm"].null_count() == res.height - overlapped.height


def test_interval_functions_on_edge_cases() -> None:
    rng = np.random.default_rng(7)
    starts = rng.integers(0, 10_000, 300)
    ends = starts + rng.integers(0, 400, 300)  # includes zero-length and nested intervals
    us, ue = merge(starts, ends)
    assert (us[1:] > ue[:-1]).all()
    a = rng.integers(-500, 10_500, 500)
    b = a + rng.integers(0, 2000, 500)
    got = overlap_with_union(us, ue, a, b)
    intervals = list(zip(starts.tolist(), ends.tolist(), strict=True))
    assert got.tolist() == [union_overlap(x, y, intervals) for x, y in zip(a.tolist(), b.tolist(), strict=True)]
    assert overlap_with_union(*merge(np.array([], np.int64), np.array([], np.int64)), a, b).sum() == 0
    assert intersection_length(np.array([0, 10]), np.array([5, 20]), np.array([3]), np.array([12])) == 4
