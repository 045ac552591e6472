"""What test_trust checks on the shared corpus's public traces, on frames built here, so that it holds without
../shared: the clock-tick guard (an excess of exactly two ticks is noise, a hair more is a case, on a whole-
microsecond clock and on nsys' nanosecond one) and the replica test (a rank whose step bag is 0.73 alike, as
HTA's sharded-embedding ranks are 0.70, lends no reference; 0.9 alike does). Expected values from the
definitions in plain Python."""

from __future__ import annotations

from collections import Counter

import polars as pl
import pytest

from traceql.analyzers.baselines.physical import TICKS
from traceql.analyzers.baselines.replicas import ALIKE, replica_groups
from traceql.analyzers.detection.labels import PAIRED_FACTOR, paired_labels

# (tick, duration, baseline): every kernel fully overlapped by communication, well over 1.2 x its baseline
KERNELS = [(1000, 7000, 5000.0), (1000, 7000, 4999.5), (1000, 7000, 5001.0), (1000, 13000, 10000.0),
           (1000, 5000, 2000.0), (1, 7, 5.0), (1, 8, 5.0), (1, 7, 4.5), (1, 70_000, 50_000.0)]


def is_case(tick: int, duration: int, baseline: float) -> bool:
    """The paired label's definition, overlapped kernels: over 1.2 x the baseline by more than two ticks."""
    return duration > PAIRED_FACTOR * baseline and duration - baseline > 2 * tick


def test_an_excess_of_two_ticks_is_no_case() -> None:
    n = len(KERNELS)
    features = pl.DataFrame({"_row": range(n), "key": ["k"] * n, "duration_ns": [d for _, d, _ in KERNELS],
                             "comm_overlap_ns": [d for _, d, _ in KERNELS], "tick_ns": [t for t, _, _ in KERNELS]},
                            schema_overrides={"_row": pl.UInt32})
    baselines = pl.DataFrame({"_row": range(n), "baseline_ns": [b for _, _, b in KERNELS],
                              "baseline_kind": ["twin"] * n, "twin_pos": [0] * n},
                             schema_overrides={"_row": pl.UInt32})
    got = paired_labels(features, baselines)
    assert TICKS == 2
    want = [is_case(*k) for k in KERNELS]
    assert want == [False, True, False, True, True, False, True, True, True]  # both sides of the boundary
    assert got["is_slowdown"].to_list() == want


def _kernels(rank: int, steps: list[Counter], kind: str = "sync", first: int = 1) -> list[dict]:
    """Compute kernels of one rank: each step a bag of keys (key → times it runs in the step)."""
    return [{"run_id": "r", "rank": rank, "step": first + i, "step_kind": kind, "key": key}
            for i, bag in enumerate(steps) for key, times in sorted(bag.items()) for _ in range(times)]


def similarity(rows: list[dict], rank_a: int, rank_b: int) -> float:
    """Σ min / Σ max over the keys of two ranks' step bags (each key's count over the rank's normal steps, per
    step): the replica definition, from the rows."""
    bags = []
    for rank in (rank_a, rank_b):
        mine = [r for r in rows if r["rank"] == rank and r["step_kind"] == "sync"]
        steps = len({r["step"] for r in mine})
        bags.append({k: n / steps for k, n in Counter(r["key"] for r in mine).items()})
    keys = bags[0].keys() | bags[1].keys()
    lo = sum(min(bags[0].get(k, 0.0), bags[1].get(k, 0.0)) for k in keys)
    return lo / sum(max(bags[0].get(k, 0.0), bags[1].get(k, 0.0)) for k in keys)


def test_a_shard_is_no_replica_without_the_corpus() -> None:
    step = Counter(a=4, b=2, c=2, d=2)
    shard = Counter(a=4, b=2, c=2, e=1)  # another rank's work: 8 of 11 alike
    near = Counter(a=4, b=2, c=2, d=1)  # one kernel fewer a step: 9 of 10 alike
    rows = (_kernels(0, [step] * 3) + _kernels(1, [step] * 2)  # two steps, the same bag per step
            + _kernels(1, [Counter(x=50)], kind="isolated", first=9)  # an isolated step is not compared
            + _kernels(2, [shard] * 3) + _kernels(3, [near] * 3))
    kernels = pl.DataFrame(rows, schema_overrides={"rank": pl.Int32, "step": pl.Int32})
    assert similarity(rows, 0, 1) == 1.0
    assert similarity(rows, 0, 2) == pytest.approx(8 / 11) and similarity(rows, 0, 2) < ALIKE
    assert similarity(rows, 0, 3) == pytest.approx(0.9) and similarity(rows, 0, 3) >= ALIKE
    assert similarity(rows, 2, 3) == pytest.approx(0.8)  # nor is the shard alike to the nearly alike rank
    got = replica_groups(kernels)
    assert got["rank"].to_list() == [0, 1, 2, 3] and got["replica"].to_list() == [0, 0, 2, 0]
