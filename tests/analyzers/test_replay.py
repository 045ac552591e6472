"""The replay on traces small enough to work out by hand: what each what-if must give, and why; then its
invariants on generated traces (hypothesis)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.paths import RUNS
from traceql.analyzers import replay
from traceql.analyzers.replay.engine import Graph
from traceql.analyzers.replay.engine import replay as run_replay
from traceql.analyzers.replay.graph import BLOCKED, INFERRED, RECORDED, build

US = 1_000


def ops(*rows: tuple, run: str = "r") -> pl.DataFrame:
    """Activities from (rank, stream, start µs, end µs, launch µs or None, correlation, kind, step[, collective])."""
    out = []
    for row in rows:
        rank, stream, start, end, launch, corr, kind, step, *coll = row
        out.append({"run_id": run, "rank": rank, "device": rank, "stream": stream, "start_ns": start * US,
                    "end_ns": end * US, "launch_ns": None if launch is None else launch * US,
                    "correlation_id": corr, "kind": kind, "step": step, "step_kind": "sync",
                    "collective": coll[0] if coll else None})
    return pl.DataFrame(out, schema=replay.OP_SCHEMA)


def waits(*rows: tuple) -> pl.DataFrame:
    return pl.DataFrame([dict(zip(replay.WAITS, ("r", *row), strict=True)) for row in rows], schema=replay.WAITS)


def step_row(result: replay.WhatIf, step: int = 1) -> dict:
    return result.steps.filter(pl.col("step") == step).row(0, named=True)


# One rank: compute A then B on stream 1; an all-reduce C on stream 2 that waits (recorded) for A. B is a case
# (20 µs, 12 alone), slowed by C beside it. Calls: A 1, record after A 2, wait on stream 2 3, C 4, B 5.
#   stream 1:  A [0, 10)   B [10, 30)
#   stream 2:         C [12, 28)      (launched at 2 µs; it began 2 µs after A ended)
ONE_RANK = ops((0, 1, 0, 10, 0, 1, "compute", 1), (0, 2, 12, 28, 2, 4, "comm", 1), (0, 1, 10, 30, 4, 5, "compute", 1))
ONE_RANK_WAIT = waits((0, 2, 3, 1, 2))  # rank, the waiting stream and its call, the recording stream and its call


def test_the_replay_puts_every_activity_where_the_trace_has_it() -> None:
    rg = build(ONE_RANK, ONE_RANK_WAIT)
    done = run_replay(rg.graph)
    assert done.start[:rg.n_ops].tolist() == rg.ops["start_ns"].to_list()
    assert done.end[:rg.n_ops].tolist() == rg.ops["end_ns"].to_list()
    assert rg.recorded == 1 and (rg.edge_kind == RECORDED).sum() == 1


def test_without_contention_the_case_takes_its_baseline() -> None:
    # B at 12 µs: it ends at 22; C still ends at 28 (it waited for A alone): the step is 28 µs, not 30
    result = replay.steps(ONE_RANK, waits=ONE_RANK_WAIT, cases=pl.Series([False, False, True]),
                          baseline=pl.Series([None, None, 12_000.0]))
    row = step_row(result)
    assert (row["measured_ns"], row["replayed_ns"], row["without_contention_ns"]) == (30_000, 30_000, 28_000)


def test_serialized_runs_each_rank_one_activity_at_a_time_in_launch_order() -> None:
    # launch order A (0), C (2), B (4): A [0, 10), then C 2 µs after A (its wait's lag) [12, 28), then B at its
    # baseline 12 µs [28, 40): compute 22 + communication 16 = 38 µs of work, 40 with the gap
    result = replay.steps(ONE_RANK, waits=ONE_RANK_WAIT, cases=pl.Series([False, False, True]),
                          baseline=pl.Series([None, None, 12_000.0]))
    assert step_row(result)["serialized_ns"] == 40_000


def test_a_wait_the_trace_did_not_record_is_inferred() -> None:
    rg = build(ONE_RANK, None)  # C began 2 µs after A ended, long after its launch: it waited for A
    assert (rg.edge_kind == INFERRED).sum() == 1 and rg.inferred == 1 and rg.unexplained == 0
    shorter = rg.graph.dur.copy()
    shorter[0] = 5_000  # A takes 5 µs: C follows it, 2 µs after
    from dataclasses import replace

    done = run_replay(replace(rg.graph, dur=shorter))
    c = rg.ops.filter(pl.col("kind") == "comm")["node"].item()
    assert done.start[c] == 7_000


# Two ranks, one all-reduce each: rank 1 launched its step 30 µs late (its CPU slept). A collective ends on both
# ranks together, each its own tail after the last arrival (measured: 5 µs). A kernel of step 0 on each rank
# first (launched at -20 µs on both). Calls: compute 1, record 2, wait 3, all-reduce 4, record 6, wait 7, compute 8.
#   rank 0: compute [0, 10), all-reduce [10, 45) (waited from 10 to 40 for rank 1), compute [45, 55)
#   rank 1: compute [30, 40), all-reduce [40, 45),                                   compute [45, 55)
TWO_RANKS = ops(
    (0, 1, -20, -15, -20, 0, "compute", 0), (1, 1, -20, -15, -20, 0, "compute", 0),
    (0, 1, 0, 10, 0, 1, "compute", 1), (0, 2, 10, 45, 1, 4, "comm", 1, "AllReduce"),
    (0, 1, 45, 55, 3, 8, "compute", 1),
    (1, 1, 30, 40, 29, 1, "compute", 1), (1, 2, 40, 45, 30, 4, "comm", 1, "AllReduce"),
    (1, 1, 45, 55, 32, 8, "compute", 1))
TWO_RANKS_WAITS = waits((0, 2, 3, 1, 2), (0, 1, 7, 2, 6), (1, 2, 3, 1, 2), (1, 1, 7, 2, 6))


def test_a_collective_joins_its_ranks_and_the_straggler_s_cost_is_its_delay() -> None:
    named = pl.DataFrame({"run_id": ["r"], "step": [1], "rank": [1]}, schema={"run_id": pl.String,
                                                                             "step": pl.Int32, "rank": pl.Int32})
    result = replay.steps(TWO_RANKS, waits=TWO_RANKS_WAITS, stragglers=named)
    row = step_row(result)
    assert (row["measured_ns"], row["replayed_ns"]) == (55_000, 55_000)
    # rank 1's CPU takes what rank 0's took between the same launches: it launches its compute at 0 (which
    # starts 1 µs after, as in the trace) and its all-reduce at 1; that starts when the compute ends, at 11; both
    # ranks end it 5 µs later, at 16, and the step at 26: the straggler cost 29 µs
    assert row["without_straggler_ns"] == 26_000
    assert row["straggler_rank"] == 1
    # nothing overlapped: serialized, the step is as it ran (each rank's all-reduce after its computation, the
    # computation after it, the two ranks joined at the all-reduce)
    assert row["serialized_ns"] == 55_000


def test_the_cpu_blocked_on_the_gpu_goes_on_when_the_gpu_is_done() -> None:
    # the CPU launched A, sat idle until A ended (at 1,000 µs) and launched B 100 µs later (a synchronisation):
    # with A shorter, B is launched 100 µs after A's new end
    trace = ops((0, 1, 10, 1_000, 0, 1, "compute", 1), (0, 1, 1_110, 1_120, 1_100, 2, "compute", 1))
    rg = build(trace)
    assert (rg.edge_kind == BLOCKED).sum() == 1
    from dataclasses import replace

    shorter = rg.graph.dur.copy()
    shorter[0] = 490_000  # A ends at 500 µs
    done = run_replay(replace(rg.graph, dur=shorter))
    assert done.start[1] == 610_000  # launched at 600, started 10 µs after its launch as in the trace


def test_a_cycle_is_broken_in_trace_order_and_counted() -> None:
    # 0 waits for 1's end and 1 for 0's: no order satisfies both
    g = Graph(base=np.array([0, 5]), dur=np.array([10, 10]), pred_ptr=np.array([0, 1, 2]),
              pred_idx=np.array([1, 0]), pred_lag=np.array([0, 0]), group=np.array([-1, -1]),
              tail=np.array([0, 0]), order=np.array([0, 1]))
    done = run_replay(g)
    assert done.forced == 1
    assert done.start.tolist() == [0, 10]


@st.composite
def traces(draw: st.DrawFn) -> tuple[pl.DataFrame, list[bool], list[float]]:
    """One rank, two streams, activities end to end on each stream (gaps allowed), each launched before it
    started and after the one before it on its stream (a stream runs in the order it was given work), the
    calls numbered in the order they were made; some of the compute ones cases with a baseline below their
    duration."""
    rows, cases, base = [], [], []
    for stream in (1, 2):
        t, launch = draw(st.integers(0, 50)), -100
        for _ in range(draw(st.integers(1, 8))):
            t += draw(st.integers(0, 30))
            d = draw(st.integers(1, 60))
            launch = max(launch + 1, t - draw(st.integers(0, 40)))
            kind = "compute" if stream == 1 else "comm"
            rows.append([0, stream, t, t + d, launch, 0, kind, 1])
            case = kind == "compute" and draw(st.booleans())
            cases.append(case)
            base.append(float(draw(st.integers(1, d)) * US) if case else None)
            t += d
    for corr, i in enumerate(sorted(range(len(rows)), key=lambda i: rows[i][4]), 1):
        rows[i][5] = corr
    return ops(*map(tuple, rows)), cases, base


@settings(max_examples=60, deadline=None)
@given(traces())
def test_what_ifs_keep_their_promises(trace: tuple[pl.DataFrame, list[bool], list[float]]) -> None:
    frame, cases, base = trace
    result = replay.steps(frame, cases=pl.Series(cases), baseline=pl.Series(base, dtype=pl.Float64))
    # serialized: one activity at a time, every case at its baseline
    work = sum(b if c else e - s for c, b, s, e in zip(cases, base, frame["start_ns"], frame["end_ns"], strict=True))
    assert step_row(result)["serialized_ns"] >= work
    for row in result.steps.iter_rows(named=True):
        assert row["replayed_ns"] == row["measured_ns"]
        assert row["without_contention_ns"] <= row["replayed_ns"]
        if not row["cases"]:
            assert row["without_contention_ns"] == row["replayed_ns"]
        assert row["without_straggler_ns"] == row["replayed_ns"]  # no straggler named


def test_the_compiled_pass_replays_as_the_python_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """The 4-rank straggler run replayed with every what-if, the pass compiled (numba) and in Python: the same
    nanoseconds for every step and every what-if."""
    from traceql.commands.whatif import whatif

    run = RUNS / "gpt2-4rank-straggler-nsys"
    _compile_all(monkeypatch, False)
    python = whatif(run).steps
    _compile_all(monkeypatch, True)
    fast = whatif(run).steps
    assert fast.equals(python) and python.height == 5


def _compile_all(monkeypatch: pytest.MonkeyPatch, on: bool) -> None:
    """Every pass compiled (``on``) or in Python, whatever the graph's size (each module's own name of it)."""
    from traceql.analyzers.replay import compiled, graph

    for module in (compiled, graph):
        monkeypatch.setattr(module, "wanted", lambda nodes: on)


def test_the_passes_loaded_ahead_are_those_a_replay_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """``warm`` loads each compiled pass with the argument types a replay gives them: the 4-rank run's what-ifs,
    every pass compiled (the serialized ones a lane at a time), load no other version of any pass."""
    from traceql.analyzers.replay import compiled, warm
    from traceql.commands.whatif import whatif

    warm.warm().join()
    loaded = {name: fn.signatures for name, fn in compiled._COMPILED.items() if name != "_started"}
    assert set(loaded) == {"_lanes_pass", "_bound_pass"}
    _compile_all(monkeypatch, True)
    assert whatif(RUNS / "gpt2-4rank-straggler-nsys").steps.height == 5
    after = {name: compiled._COMPILED[name].signatures for name in loaded}
    assert after == loaded and all(len(s) == 1 for s in after.values())


def test_batches_replay_as_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """A large run is replayed in batches of whole steps, each numbered on its own: the same steps as one batch
    (batches of 3,000 nodes on the 4-rank straggler run: several steps a batch, a step a batch, and more)."""
    from traceql.analyzers.replay import engine
    from traceql.commands.whatif import whatif

    run = RUNS / "gpt2-4rank-straggler-nsys"
    whole = whatif(run).steps
    monkeypatch.setattr(engine, "BATCH", 3_000)
    assert whatif(run).steps.equals(whole)
