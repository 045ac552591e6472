"""`traceql.analyzers.diff`: kernels paired by step alignment on small frames (expected values worked out by hand), and
on a real run compared with itself: every kernel pairs with its own counterpart, checked with sqlite3."""

from __future__ import annotations

from collections import defaultdict

import polars as pl
import pytest

from tests.oracle import nsys_steps, read_kernels
from tests.paths import DDP_FILES
from traceql.analyzers import diff as d
from traceql.labelling.inputs import read_timeline


def steps(rank: int, sequences: list[list[tuple[str, int]]]) -> pl.DataFrame:
    """Compute kernels of normal steps 0, 1, … of one rank: each step a list of (key, duration)."""
    rows = [{"rank": rank, "step": s, "step_kind": "sync", "kind": "compute", "key": key, "launch_ns": 1000 * s + i,
             "start_ns": 1000 * s + i, "duration_ns": dur, "signature": f"{key} g1x1x1 b1x1x1", "short_name": key,
             "name": key} for s, seq in enumerate(sequences) for i, (key, dur) in enumerate(seq)]
    return pl.DataFrame(rows, schema_overrides={"rank": pl.Int32, "step": pl.Int32})


BEFORE = steps(0, [[("a", 10), ("b", 20), ("c", 30)], [("a", 12), ("b", 22), ("c", 36)],
                   [("a", 11), ("b", 26), ("c", 33)]])  # medians: a 11, b 22, c 33
AFTER = steps(0, [[("a", 15), ("x", 5), ("c", 40)], [("a", 17), ("x", 7), ("c", 44)]])  # a 16, x 6, c 42


def test_paired_new_and_removed_by_hand() -> None:
    pairs, canonical = d.pair_kernels(BEFORE, AFTER)
    assert pairs.sort("step", "pos").select("key", "before_pos", "before_ns").rows() == [
        ("a", 0, 11.0), ("x", None, None), ("c", 2, 33.0)] * 2
    changes = d.kernel_changes(pairs)
    assert changes.select("key", "instances", "before_ns", "after_ns", "delta_ns", "after_actual_ns").rows() == [
        ("c", 2, 66.0, 84.0, 18.0, 84.0), ("a", 2, 22.0, 32.0, 10.0, 32.0)]  # by |delta|
    assert changes["delta_pct"].to_list() == pytest.approx([100 * 18 / 66, 100 * 10 / 22])
    assert d.new_kernels(pairs).select("key", "instances", "after_ns").rows() == [("x", 2, 12.0)]
    # b: in BEFORE's step, aligned with nothing in either of AFTER's two steps
    assert d.removed_kernels(pairs, canonical, BEFORE).select("key", "instances", "before_ns").rows() == [
        ("b", 2, 44.0)]


def test_after_times_are_medians_of_its_own_steps() -> None:
    """A slowed instance moves the measured total, not the typical one the comparison uses."""
    after = steps(0, [[("a", 11)], [("a", 11)], [("a", 50)]])
    before = steps(0, [[("a", 11)]])
    changes = d.kernel_changes(d.pair_kernels(before, after)[0])
    assert changes.select("before_ns", "after_ns", "delta_ns", "after_actual_ns").row(0) == (33.0, 33.0, 0.0, 72.0)


def test_ranks_pair_by_number() -> None:
    """Rank 1 of AFTER pairs with rank 1 of BEFORE, whose step is another; a rank BEFORE lacks is all new."""
    before = pl.concat([steps(0, [[("a", 10)]]), steps(1, [[("b", 20)]])])
    after = pl.concat([steps(0, [[("a", 10)]]), steps(1, [[("b", 30)]]), steps(2, [[("a", 5)]])])
    pairs, canonical = d.pair_kernels(before, after)
    assert pairs.sort("rank").select("rank", "before_ns").rows() == [(0, 10.0), (1, 20.0), (2, None)]
    assert d.new_kernels(pairs).select("key", "instances").rows() == [("a", 1)]
    assert d.removed_kernels(pairs, canonical, before).is_empty()


def test_change_and_verdict() -> None:
    assert d.change_pct(100.0, 104.1) == pytest.approx(4.1)
    assert d.change_pct(None, 1.0) is None and d.change_pct(0.0, 1.0) is None
    assert [d.verdict(c, 2.0) for c in (4.1, -3.0, 2.0, -1.9, 0.0, None)] == [
        "regressed", "improved", "no change", "no change", "no change", "unknown"]
    assert d.verdict(1.5, tolerance=1.0) == "regressed"
    # the tail decides too: a straggler's steps move the 90th percentile more than the mean
    assert d.verdict(0.4, 2.0, tail=36.0) == "regressed" and d.verdict(-3.0, 2.0, tail=2.5) == "regressed"
    assert d.verdict(-3.0, 2.0, tail=1.0) == "improved" and d.verdict(1.0, 2.0, tail=-5.0) == "no change"


def test_rank_changes_keep_ranks_of_either_run() -> None:
    cols = ["comm_comp_overlap_pct", "compute_ns", "comm_ns", "memory_ns", "idle_ns", "cases", "time_lost_ns"]
    before = pl.DataFrame({"rank": [0], **{c: [1] for c in cols}}, schema_overrides={"rank": pl.Int32})
    after = pl.DataFrame({"rank": [0, 1], **{c: [2, 3] for c in cols}}, schema_overrides={"rank": pl.Int32})
    got = d.rank_changes(before, after)
    assert got["rank"].to_list() == [0, 1]
    assert got["compute_ns_before"].to_list() == [1, None] and got["compute_ns_after"].to_list() == [2, 3]


def oracle_steps() -> dict[tuple[int, int], list[dict]]:
    """``(rank, step) → compute kernels in launch order`` of the embedded run's normal steps, by sqlite3
    (one export per rank, in rank order)."""
    out: dict[tuple[int, int], list[dict]] = defaultdict(list)
    for rank, path in enumerate(DDP_FILES):
        where = nsys_steps(path)
        for k in read_kernels(path, keyed=True):
            step = where.get(((k["pid"] >> 24) & 0xFFFFFF, k["corr"]))
            if step is not None and step[1] == "sync" and not k["comm"]:
                out[(rank, step[0])].append(k)
    for ks in out.values():
        ks.sort(key=lambda k: (k["launch"], k["start"]))
    return out


def test_a_run_compared_with_itself_pairs_every_kernel_with_itself() -> None:
    kernels = read_timeline(DDP_FILES).kernels
    pairs, _ = d.pair_kernels(kernels, kernels)
    truth = oracle_steps()
    assert pairs.height == sum(map(len, truth.values()))
    assert pairs["before_pos"].null_count() == 0
    for r in pairs.iter_rows(named=True):
        mine = truth[(r["rank"], r["step"])][r["pos"]]
        counterpart = truth[(r["rank"], r["before_step"])][r["before_pos"]]
        # the kernel at this place is the one the row describes, and its counterpart is the same kernel
        assert mine["end"] - mine["start"] == r["duration_ns"]
        assert r["before_pos"] == r["pos"] and counterpart["key"] == mine["key"]
    changes = d.kernel_changes(pairs)
    assert changes["delta_ns"].abs().max() == 0 and d.new_kernels(pairs).is_empty()
    assert changes["instances"].sum() == pairs.height
