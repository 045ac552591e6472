"""Runs that are not DDP (2 x H200, shipped): GPT-2 blocks under FSDP2 and tensor-parallel transformer blocks,
each with its single-GPU isolated run of the same shapes as the truth.

- Their in-run isolated steps ran with communication (FSDP2 gathers its shards, tensor parallelism all-reduces
  every block), so they are no reference: the labels fall back to the detector, and a note says why.
- FSDP2: the detector against the twins, over the kernels that have a twin (FSDP's copies have none).
- Tensor parallelism: every all-reduce blocks the compute after it, so nothing overlaps and nothing is a case,
  either way.
"""

from __future__ import annotations

import polars as pl
import pytest

from tests.paths import INRUN_TRACE, RUNS
from traceql.analyzers.baselines.kinds import TWIN
from traceql.commands.detect import detect
from traceql.labelling.inputs import read_timeline

FSDP2, FSDP2_SINGLE = RUNS / "gpt2-fsdp2-nsys", RUNS / "gpt2-fsdp2-single-nsys"
TP, TP_SINGLE = RUNS / "block-tp-nsys", RUNS / "block-tp-single-nsys"
NOT_A_REFERENCE = "its isolated steps ran with communication"


@pytest.mark.parametrize("run", [FSDP2, RUNS / "gpt2-fsdp2-straggler-nsys", TP, RUNS / "block-tp-straggler-nsys"],
                         ids=lambda p: p.name)
def test_isolated_steps_that_communicated_are_not_a_reference(run) -> None:
    timeline = read_timeline(run)
    # the collection marked isolated steps; they are left out of the steps, and no kernel is labelled in them
    assert timeline.kernels["step_kind"].ne("isolated").fill_null(True).all()
    assert (timeline.steps["step_kind"] != "isolated").all()
    assert any(NOT_A_REFERENCE in n and run.name in n for n in timeline.notes)
    kinds = set(detect(run).kernels["reference_kind"].unique().drop_nulls())
    assert kinds and TWIN not in kinds  # every label on the detector's own references


def test_a_ddp_runs_isolated_steps_stay_its_reference() -> None:
    timeline = read_timeline(INRUN_TRACE)
    assert (timeline.kernels["step_kind"] == "isolated").any()
    assert not any(NOT_A_REFERENCE in n for n in timeline.notes)
    assert (detect(INRUN_TRACE).kernels["reference_kind"] == TWIN).any()


def _judged_scores(run, single) -> tuple[float, float]:
    """Precision and recall of the detector's cases against twin labels, over the kernels of normal steps that
    have a twin."""
    truth = detect(run, baseline=[single]).kernels
    pred = detect(run).kernels
    keys = ["run_id", "rank", "stream", "start_ns"]
    on = pred.select(*keys, "is_slowdown").join(
        truth.select(*keys, pl.col("is_slowdown").alias("gt"), pl.col("reference_kind").alias("kind")),
        on=keys, how="inner")
    on = on.filter(pl.col("kind") == TWIN)
    assert on.height > 0.8 * truth.filter(pl.col("step_kind") == "sync").height  # most kernels have a twin
    tp = on.filter(pl.col("is_slowdown") & pl.col("gt")).height
    return tp / on["is_slowdown"].sum(), tp / on["gt"].sum()


def test_fsdp2_detector_labels_agree_with_the_twins() -> None:
    """Measured by bench/detector_f1.py: P 0.976, R 0.827 (the misses: every instance of some kernels overlaps
    an all-gather, so the reference the run offers is itself slowed)."""
    precision, recall = _judged_scores(FSDP2, FSDP2_SINGLE)
    assert precision >= 0.95 and recall >= 0.75


def test_tensor_parallel_blocks_overlap_nothing_and_have_no_case() -> None:
    truth = detect(TP, baseline=[TP_SINGLE]).kernels
    compute = truth.filter(pl.col("step_kind") == "sync")
    assert compute.height > 1000 and (compute["reference_kind"] == TWIN).all()  # every kernel has its twin
    assert truth["comm_overlap_ns"].sum() == 0
    assert not truth["is_slowdown"].any() and not detect(TP).kernels["is_slowdown"].any()
