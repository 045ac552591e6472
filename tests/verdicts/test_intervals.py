"""Every what-if figure with the error it has earned (``verdicts.intervals``, ``verdicts.measured``): an interval
where the validation measured runs of the run's class, made of its own steps and its class's worst error; none,
and why, where it did not (another GPU, other collectives, a figure never validated on its class)."""

from __future__ import annotations

import json
from functools import cache

import polars as pl
import pytest

from tests.analyzers.test_profiler import _bart
from tests.paths import DDP_TRACE, PUBLIC, RUNS
from traceql.analyzers.spread import median_bounds
from traceql.commands.whatif import whatif
from traceql.verdicts.measured import FIGURES


@cache
def _classes() -> dict:
    return json.loads(FIGURES.read_text())["classes"]


def _overlap(lines: list[str]) -> str:
    return next(x for x in lines if x.startswith("overlap "))


def test_a_validated_class_gets_its_steps_spread_widened_by_its_worst_error() -> None:
    """GPT-2 on 2 x H100 (GPU-bound): each step's serialized figure less and plus the class's worst serialized
    error; the run's saving between the order-statistic bounds of its steps' savings, each widened by that
    error of a median step; the line prints that interval."""
    got = whatif(RUNS / "gpt2-pair-nsys")
    c = _classes()["h100 GPU-bound"]
    e = c["serialized"]
    steps = got.steps
    assert steps.height and (steps["serialized_low_ns"] == (steps["serialized_ns"] * (1 - e)).round(0)
                             .cast(pl.Int64)).all()
    assert (steps["serialized_high_ns"] >= steps["serialized_ns"]).all()
    run = got.runs[0]
    assert run.run_class and run.run_class.startswith("H100, GPU-bound")
    judged = steps.filter(~pl.col("first"))
    low, high, _ = median_bounds((judged["serialized_ns"] - judged["replayed_ns"]).to_numpy())
    step = float(judged["replayed_ns"].median())
    assert run.intervals["overlap_saves_ns"] == [round(low - e * step), round(high + e * step)]
    lo, hi = run.intervals["overlap_saves_ns"]
    assert lo <= run.overlap_saves_ns <= hi
    assert _overlap(run.lines).endswith(f"over serial ({lo / 1e6:+,.1f} to {hi / 1e6:+,.1f} ms)")
    assert got.measured is not None and f"±{e:.1%} of the step" in got.measured
    assert f"{c['configurations']} validated configurations of its class" in got.measured


def test_a_class_the_validation_never_ran_gets_no_interval() -> None:
    """The embedded example ran on H200, GPU-bound; the validated H200 runs are launch-bound: no figure carries
    an interval."""
    got = whatif(DDP_TRACE)
    assert "(" not in _overlap(got.runs[0].lines)
    assert got.steps["serialized_low_ns"].null_count() == got.steps.height
    assert got.runs[0].intervals["overlap_saves_ns"] is None
    assert got.measured is not None and got.measured.startswith("This run (H200, GPU-bound: GPUs idle")
    assert "no configuration of its class was validated, so its figures carry no interval" in got.measured


def test_collectives_never_validated_get_no_interval() -> None:
    got = whatif(RUNS / "fsdp2-pair-nsys")  # H100, FSDP2's all-gathers and reduce-scatters
    assert got.measured is not None and "were never validated (DDP's all-reduces were)" in got.measured
    assert got.steps["serialized_high_ns"].null_count() == got.steps.height


def test_a_launch_bound_run_gets_its_class_and_no_straggler_bound() -> None:
    """BART in bf16 on 2 x H100 (GPUs idle about half of each step): its class is the launch-bound one, whose
    serialized error the library models measured; no straggler was injected into a launch-bound run, so the
    straggler figure carries none."""
    got = whatif(_bart())
    run = got.runs[0]
    assert run.run_class and "launch-bound" in run.run_class
    c = _classes()["h100 launch-bound"]
    assert c["straggler"] is None and c["configurations"] >= 4
    assert not any("±" in line for line in run.lines)
    assert got.measured is not None and "without the straggler never validated on such runs" in got.measured
    assert got.steps["without_straggler_low_ns"].null_count() == got.steps.height
    e = c["serialized"]
    assert (got.steps["serialized_high_ns"] == (got.steps["serialized_ns"] * (1 + e)).round(0)
            .cast(pl.Int64)).all()


@pytest.mark.parametrize("cap", [None, 2.0])
def test_every_step_has_the_interval_columns(cap: float | None) -> None:
    got = whatif(RUNS / "gpt2-pair-nsys", bucket_cap=cap)
    for column in ("serialized", "without_straggler", "bucket_cap"):
        assert {f"{column}_low_ns", f"{column}_high_ns"} <= set(got.steps.columns)
    if cap is not None:
        assert got.steps["bucket_cap_low_ns"].null_count() < got.steps.height


@pytest.mark.corpus
def test_a_gpu_the_validation_never_ran_gets_no_interval() -> None:
    """HTA's test trace from a V100 (one rank, launch-bound): no validated run on its GPUs, no interval."""
    got = whatif(PUBLIC / "hta-kineto" / "df_index_resolver")
    assert got.measured is not None and got.measured.startswith("This run (Tesla V100-SXM2-32GB, launch-bound")
    assert "no run on its GPUs was validated" in got.measured
    assert got.steps["serialized_low_ns"].null_count() == got.steps.height


def test_a_run_traced_with_another_profiler_gets_no_interval() -> None:
    """GPT-2 on 2 x H100, GPU-bound like the validated class, but traced with torch.profiler (every validated
    run was an nsys export): no interval."""
    got = whatif(RUNS / "gpt2-pair-torch")
    assert got.runs[0].run_class and got.runs[0].run_class.startswith("H100, GPU-bound")
    said = "it was traced with torch.profiler, the validated runs with nsys"
    assert got.measured is not None and said in got.measured
    assert all(v is None for v in got.runs[0].intervals.values())
    assert got.steps["serialized_low_ns"].null_count() == got.steps.height


def test_a_world_the_validation_never_ran_gets_no_interval() -> None:
    """A matrix twin (one H100, GPU-bound, nsys): its class was validated on 2 and 4 GPUs only."""
    from traceql.validation import load_matrix

    twin = next(r for r in load_matrix().runs if r.role == "twin" and not r.light)
    got = whatif(twin.path())
    worlds = " and ".join(map(str, _classes()["h100 GPU-bound"]["worlds"]))
    assert got.measured is not None and f"one rank in its trace, the validated runs of its class had {worlds}" \
        in got.measured
    assert all(v is None for v in got.runs[0].intervals.values())
