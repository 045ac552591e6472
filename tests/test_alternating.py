"""Alternating runs (``comm=alternate``: odd steps serialized, even steps stock, in one process) as collected on
2 x H200 (``datasets/library/h200-i``), and the validation's reading of them (``traceql.validation.alternating``):
the steps are what their results say, the pairs' real saving is what the wall clock measured, and the
serialized what-if on their stock steps is scored against it."""

from __future__ import annotations

import statistics
from functools import cache

import polars as pl
import pytest

from tests.paths import ROOT
from traceql.analyzers.untraced import untraced
from traceql.labelling.inputs import read_timeline
from traceql.validation.alternating import AlternatingRun, alternating_run, pair_savings, serial_steps
from traceql.validation.matrix import MatrixRun, load_matrix

LIBRARY = ROOT / "datasets" / "library"


@cache
def _runs() -> list[MatrixRun]:
    return [r for r in load_matrix(LIBRARY).runs if r.role == "alt"]


@cache
def _alternating(name: str) -> AlternatingRun:
    return alternating_run(next(r for r in _runs() if r.name == name))


def test_every_alternating_run_serialized_its_odd_steps() -> None:
    runs = _runs()
    assert {r.model for r in runs} == {"bart", "bert", "efficientnet", "qwen2moe", "regnet", "resnet50b32", "twotower"}
    for run in runs:
        assert serial_steps(run) == {1, 3, 5, 7}, run.name
        for result in run.results():
            assert result["comm"] == "alternate"
            for t in result["step_times_ms"]:
                assert t["serial"] == (t["step"] % 2 == 1), (run.name, t)


def _overlapped(kernels: pl.DataFrame) -> pl.DataFrame:
    """Per step and rank, the ns its all-reduces ran beside its computation."""
    comm = kernels.filter(pl.col("kind") == "comm").select("rank", "step", "start_ns", "end_ns")
    comp = kernels.filter(pl.col("kind") == "compute").select("rank", "step", pl.col("start_ns").alias("s"),
                                                              pl.col("end_ns").alias("e"))
    both = comm.join(comp, on=["rank", "step"])
    return (both.with_columns((pl.min_horizontal("end_ns", "e") - pl.max_horizontal("start_ns", "s")).clip(0)
                              .alias("ns")).group_by("step").agg(pl.col("ns").sum()))


def test_the_serialized_steps_of_the_trace_overlap_nothing() -> None:
    """In the trace of BERT's alternating run (GPU-bound), the stock steps' all-reduces run beside the backward
    and the serialized steps' beside no computation at all."""
    run = next(r for r in _runs() if r.model == "bert")
    per_step = {s: ns for s, ns in _overlapped(read_timeline(run.path()).kernels).iter_rows()}
    for step in (2, 4, 6):
        assert per_step[step] > 1_000_000, per_step  # over 1 ms of a 77 ms step
    for step in (1, 3, 5, 7):
        assert per_step.get(step, 0) < 20_000, per_step


def test_a_pair_is_a_stock_step_between_two_serialized_ones() -> None:
    run = next(r for r in _runs() if r.model == "bert")
    steps = {t["step"]: t["ms"] for t in run.results()[0]["step_times_ms"] if t["window"]}
    timed = [(s, ms, s % 2 == 1) for s, ms in sorted(steps.items())]
    got = pair_savings(timed)
    assert got == pytest.approx([(steps[s - 1] + steps[s + 1]) / 2 - steps[s] for s in (2, 4, 6)])
    assert pair_savings([x for x in timed if x[0] != 3]) == pytest.approx(got[2:])  # a gap breaks a pair


def test_the_untraced_steps_of_each_kind_are_apart() -> None:
    """An alternating run's untraced figure is its stock steps' (the what-if is asked about them); its serialized
    steps are asked for by name."""
    run = next(r for r in _runs() if r.name == "bert-2g-cap25-alt-r1")
    ranks = [r["step_times_ms"] for r in run.results()]
    stock, serial = untraced(ranks), untraced(ranks, serial=True)
    assert stock is not None and serial is not None
    assert stock.untraced_steps == 11 and serial.untraced_steps == 11  # 24 outside, first of each kind left out
    assert serial.untraced_ms > stock.untraced_ms  # BERT's overlap saves a ms (GPU-bound)


def test_the_real_saving_is_the_pairs() -> None:
    """GPU-bound BERT: every traced pair shows overlap saving 0.5-2 ms, and the what-if says so within 0.7 ms;
    launch-bound two-tower: the pairs show serializing saves time (the CPU work of each all-reduce's hook and
    events leaves the backward), and the what-if on the stock steps says it saves, too."""
    bert = _alternating("bert-2g-cap25-alt-r1")
    assert all(0.5 < x < 2.0 for x in bert.real_savings), bert.real_savings
    assert abs(bert.saving_ms - statistics.median(bert.real_savings)) < 0.7
    two = [_alternating(f"twotower-2g-cap25-alt-r{k}") for k in (1, 2, 3)]
    pairs = [x for a in two for x in a.real_savings]
    assert statistics.median(pairs) < 0
    assert statistics.median(a.saving_ms for a in two) < 0
