"""The launches a run's GPUs waited for, by the CPU section that issued them (``analyzers.late_launches``),
from a timeline read whole or a shard of it: what the idle cause is split by in every command's causes."""

from __future__ import annotations

import polars as pl

from traceql.analyzers.late_launches import waits
from traceql.model.step_marker import step_text

GPU_SIDE = ("gpu_user_annotation",)  # Kineto's copies of the CPU's annotations on the GPU's timeline


def cpu_ranges(nvtx: pl.DataFrame) -> pl.DataFrame:
    """The annotation ranges of ``nvtx`` (the model's relation) a CPU section is named by: neither a step's
    (``step_<i>``, ``ProfilerStep#<i>``, `collect`'s ``epoch<e>_step_<i>`` outside its window) nor a copy on
    the GPU's timeline."""
    return nvtx.filter(~pl.col("text").fill_null("").str.contains(step_text())
                       & ~pl.col("text").fill_null("").str.contains(r"^epoch[0-9]+_step_[0-9]+$")
                       & ~pl.col("domain").fill_null("").is_in(GPU_SIDE)
                       & pl.col("text").is_not_null() & (pl.col("end_ns") > pl.col("start_ns")))


def late_waits(ops: pl.DataFrame, nvtx: pl.DataFrame) -> pl.DataFrame:
    """``analyzers.late_launches.waits`` of ``ops`` (GPU activities, as the trace times them) named by the CPU
    ranges of ``nvtx``."""
    return waits(ops, cpu_ranges(nvtx))
