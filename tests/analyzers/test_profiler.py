"""The replay without the profiler (``analyzers.replay.profiler``) on real runs: the CPU's time before each launch
scaled, the factor found that gives the run's untraced steps, and what it moves on a launch-bound run (a library
model whose traced steps the profiler slowed 43 %) against a GPU-bound one."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import pytest

from tests.paths import ROOT, RUNS
from traceql.analyzers.replay import run as replay_run
from traceql.analyzers.replay.activities import activities, on_clock
from traceql.analyzers.replay.engine import replay
from traceql.analyzers.replay.graph import BLOCKED, CHAIN, RunGraph, build
from traceql.analyzers.replay.profiler import calibrated, cpu_scaled
from traceql.labelling.inputs import read_timeline, run_untraced
from traceql.validation.matrix import load_matrix

LIBRARY = ROOT / "datasets" / "library"


@cache
def _bart() -> Path:
    return load_matrix(LIBRARY).run("bart-2g-cap25-stock-r1").path()  # unpacked once into the cache


@cache
def _graph(folder: Path) -> tuple[RunGraph, np.ndarray]:
    tl = read_timeline([folder])
    rg = build(on_clock(activities(tl.kernels, tl.memops, tl.ranks)), tl.waits)
    return rg, replay_run._parts(rg)


def _median(rg: RunGraph, done) -> float:
    return replay_run._median_step(rg, done, np.zeros(rg.n_ops, bool))


def test_only_the_cpus_own_time_is_scaled() -> None:
    rg, _ = _graph(_bart())
    node = np.repeat(np.arange(rg.graph.n), np.diff(rg.graph.pred_ptr))
    cpu = np.isin(rg.edge_kind, (CHAIN, BLOCKED)) & (node >= rg.n_ops)
    half = cpu_scaled(rg, 0.5)
    assert np.array_equal(cpu_scaled(rg, 1.0).pred_lag, rg.graph.pred_lag)
    assert np.array_equal(half.pred_lag[~cpu], rg.graph.pred_lag[~cpu])
    assert np.allclose(half.pred_lag[cpu], rg.graph.pred_lag[cpu] / 2, atol=1)
    assert cpu.sum() > 10_000 and rg.graph.pred_lag[cpu].sum() > 0


def test_the_factor_gives_the_untraced_step() -> None:
    """BART's traced steps took 101.3 ms, its untraced 70.6 (the same processes): the factor found replays the
    median step at that share of the trace's, and a launch-bound run's step moves with its CPU."""
    folder = _bart()
    rg, part = _graph(folder)
    found = run_untraced([folder])
    assert found is not None
    ratio = found[1].untraced_ms / found[1].traced_ms
    whole = replay(rg.graph, part, rg.measured)
    cal = calibrated(rg, part, whole, ratio, lambda r: _median(rg, r))
    assert 0.3 < cal.factor < 0.9 and cal.residual_ns == 0
    assert cal.step_ns == pytest.approx(_median(rg, whole) * ratio, rel=0.01)
    slower = _median(rg, replay(cpu_scaled(rg, min(cal.factor + 0.2, 1.0)), part, whole))
    assert slower > cal.step_ns * 1.05
    same = calibrated(rg, part, whole, 0.97, lambda r: _median(rg, r))  # within the run's noise: not the profiler's
    assert same.factor == 1.0 and same.replayed is whole


def test_a_gpu_bound_step_does_not_move_with_its_cpu() -> None:
    """GPT-2 on 2 x H100 keeps its GPUs busy: half the CPU time before every launch moves its step < 2 %, where
    it moves BART's by more than 15 %."""
    def moved(folder: Path) -> float:
        rg, part = _graph(folder)
        whole = replay(rg.graph, part, rg.measured)
        return 1 - _median(rg, replay(cpu_scaled(rg, 0.5), part, whole)) / _median(rg, whole)

    assert abs(moved(RUNS / "gpt2-pair-nsys")) < 0.02
    assert moved(_bart()) > 0.15


def test_the_untraced_columns_are_null_without_untraced_steps() -> None:
    tl = read_timeline([RUNS / "gpt2-pair-nsys"])
    ops = on_clock(activities(tl.kernels, tl.memops, tl.ranks))
    got = replay_run.steps(ops, waits=tl.waits, ways=("untraced_ns",)).steps
    assert got.height and got["untraced_ns"].null_count() == got.height
    assert got["cpu_factor"].null_count() == got.height
