"""`whatif` without the profiler: on a run that timed its untraced steps, every step replayed with the CPU's time
as it ran untraced (``analyzers.replay.profiler``), and the verdict says what the step and the overlap are there."""

from __future__ import annotations

import polars as pl

from tests.analyzers.test_profiler import _bart
from tests.paths import RUNS
from traceql.commands.whatif import whatif
from traceql.labelling.inputs import run_untraced


def test_the_untraced_step_is_the_runs_own() -> None:
    folder = _bart()
    got = whatif(folder)
    found = run_untraced([folder])
    assert found is not None
    judged = got.steps.filter(~pl.col("first"))
    ratio = found[1].untraced_ms / found[1].traced_ms  # 70.6 / 101.3 ms
    assert abs(judged["untraced_ns"].median() / (judged["replayed_ns"].median() * ratio) - 1) < 0.01
    factor = got.steps["cpu_factor"].unique().to_list()
    assert len(factor) == 1 and 0.3 < factor[0] < 0.9
    run = got.runs[0]
    assert run.untraced is not None and run.untraced["step_ns"] == round(judged["untraced_ns"].median())
    line = next(x for x in run.lines if x.startswith("without the profiler"))
    assert f"its CPU ran {1 / factor[0]:.1f}x slower traced" in line and "where overlap " in line
    assert run.to_dict()["untraced"]["cpu_factor"] == factor[0]


def test_a_run_the_profiler_barely_slowed_is_its_trace() -> None:
    """GPT-2 on 2 x H100: traced and untraced steps within a few per cent: the untraced replay is the trace's."""
    got = whatif(RUNS / "gpt2-pair-nsys")
    assert (got.steps["untraced_ns"] == got.steps["replayed_ns"]).all()
    assert not any(x.startswith("without the profiler") for x in got.runs[0].lines)
