"""The launches a launch-bound run's GPUs waited for, by the CPU section that issued them
(``analyzers.late_launches``), on a real trace: the two-tower recommender on 2 x H200, collected with each step's
forward, backward and optimizer in NVTX ranges; checked against a plain loop over its activities."""

from __future__ import annotations

from collections import defaultdict
from functools import cache

import numpy as np
import polars as pl
import pytest

from tests.paths import ROOT
from traceql.analyzers.late_launches import by_section, innermost, waits
from traceql.analyzers.replay.activities import activities
from traceql.labelling.inputs import Timeline, read_timeline
from traceql.labelling.late import cpu_ranges
from traceql.validation.matrix import load_matrix

RUN = "twotower-2g-cap25-alt-r4"


@cache
def _timeline() -> Timeline:
    return read_timeline(load_matrix(ROOT / "datasets" / "library").run(RUN).path())


def _oracle(ops: pl.DataFrame, ranges: pl.DataFrame) -> dict[tuple[int, int, str | None], int]:
    """Each rank's steps walked in start order: an idle gap whose ending activity was launched after the gap
    began, given whole to the latest begun range that holds its launch."""
    out: dict[tuple[int, int, str | None], int] = defaultdict(int)
    spans = {r: list(zip(part["start_ns"], part["end_ns"], part["text"], strict=True))
             for (r,), part in ranges.group_by("rank")}
    for (rank, step), part in ops.filter(pl.col("step_kind") == "sync").group_by("rank", "step"):
        free = None
        for start, end, launch in part.sort("start_ns", "end_ns").select("start_ns", "end_ns", "launch_ns").rows():
            if free is not None and launch is not None and start > free and launch > free:
                holding = [(a, -b, t) for a, b, t in spans.get(rank, []) if a <= launch < b]
                out[(rank, step, max(holding)[2] if holding else None)] += start - free
            free = end if free is None else max(free, end)
    return dict(out)


def test_each_wait_goes_to_the_range_that_issued_its_launch() -> None:
    tl = _timeline()
    ops = activities(tl.kernels, tl.memops, tl.ranks)
    ranges = cpu_ranges(tl.nvtx)
    got = waits(ops, ranges)
    assert {(r["rank"], r["step"], r["section"]): r["wait_ns"] for r in got.iter_rows(named=True)} == \
        _oracle(ops, ranges)
    # the collector's sections hold the steps' CPU: nearly every wait is named, most by forward and backward
    named = got.filter(pl.col("section").is_in(["forward", "backward", "optimizer"]))["wait_ns"].sum()
    assert named > 0.7 * got["wait_ns"].sum()
    assert set(got["section"].drop_nulls()) >= {"forward", "backward", "optimizer", "ncclAllReduce"}


def test_a_run_waits_the_mean_of_its_ranks_a_step() -> None:
    tl = _timeline()
    got = waits(activities(tl.kernels, tl.memops, tl.ranks), cpu_ranges(tl.nvtx))
    judged = got.select("run_id", "step").unique().filter(pl.col("step") > got["step"].min())
    out = by_section(got, judged)
    kept = got.join(judged, on=["run_id", "step"])
    assert abs(out["wait_ns"].sum() - kept["wait_ns"].sum() / (judged.height * 2)) <= out.height
    assert out["share"].sum() == pytest.approx(1.0)
    assert out["wait_ns"].to_list() == sorted(out["wait_ns"].to_list(), reverse=True)


def test_innermost_takes_the_latest_begun_open_range() -> None:
    """Ranges of two threads that overlap without nesting: a time after the inner one closed belongs to the
    outer one again; a time outside all to none."""
    ranges = pl.DataFrame({"start_ns": [0, 10, 20, 40], "end_ns": [100, 50, 30, 60],
                           "text": ["step", "backward", "ncclAllReduce", "hook"]})
    at = [-1, 5, 10, 25, 30, 45, 55, 60, 99, 100]
    assert innermost(ranges, np.array(at)) == \
        [None, "step", "backward", "ncclAllReduce", "backward", "hook", "hook", "step", "step", None]


def test_the_replay_tells_a_launch_bound_run_as_the_verdicts_class_does() -> None:
    """``removed.launch_bound`` (which runs' stragglers' pace is idle) agrees with the class `whatif` prints."""
    from tests.paths import RUNS
    from traceql.analyzers.replay.activities import on_clock
    from traceql.analyzers.replay.graph import build
    from traceql.analyzers.replay.removed import launch_bound
    from traceql.analyzers.step_breakdown import LAUNCH_BOUND_IDLE, idle_share, step_breakdown

    for tl in (_timeline(), read_timeline(RUNS / "gpt2-pair-nsys")):
        rg = build(on_clock(activities(tl.kernels, tl.memops, tl.ranks)), tl.waits)
        share = idle_share(step_breakdown(tl.kernels, tl.memops, tl.steps))
        assert share is not None
        assert bool(launch_bound(rg)) == (share > LAUNCH_BOUND_IDLE)
