"""Per step and rank: where a training step's time went.

For every normal step (NVTX ``step_<i>`` / Kineto ``ProfilerStep#<i>``) of every rank, over the GPU
activity the step launched (attributed by the CPU launch call, never by GPU time):

- ``cpu_ns``: the step's CPU range; ``gpu_ns``: its first GPU start to its last GPU end;
- ``compute_ns``, ``comm_ns``, ``memory_ns``: the unions of its compute kernels, communication kernels and
  memory operations (copies and sets);
- ``idle_ns``: ``gpu_ns`` minus the union of all its activity (the GPU did nothing of this step);
- ``exposed_comm_ns``: communication time with no compute kernel of the step running alongside (the part of
  ``comm_ns`` that overlapping did not hide).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import numpy as np
import polars as pl

from traceql.analyzers.intervals import grouped_lengths

STEP_KEY = ["run_id", "rank", "step"]
BREAKDOWN = {"run_id": pl.String, "rank": pl.Int32, "step": pl.Int32, "cpu_ns": pl.Int64, "gpu_ns": pl.Int64,
             "compute_ns": pl.Int64, "comm_ns": pl.Int64, "memory_ns": pl.Int64, "idle_ns": pl.Int64,
             "exposed_comm_ns": pl.Int64}


def _activity(kernels: pl.DataFrame, memops: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """The normal steps' activity, each row with its step's number among ``steps`` (``g``) and its kind."""
    cols = [*STEP_KEY, "start_ns", "end_ns", "kind"]
    index = steps.select(*STEP_KEY).with_row_index("g")
    return pl.concat([f.lazy().filter(pl.col("step_kind") == "sync").select(cols) for f in (kernels, memops)]
                     ).join(index.lazy(), on=STEP_KEY).collect()


def step_breakdown(kernels: pl.DataFrame, memops: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """One row per (run_id, rank, step) of the normal steps (module doc); ``steps`` is the model's relation."""
    steps = steps.filter(pl.col("step_kind") == "sync").sort(STEP_KEY)
    act = _activity(kernels, memops, steps)
    n = steps.height

    def part(mask: pl.Expr) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        rows = act.filter(mask)
        return rows["g"].to_numpy(), rows["start_ns"].to_numpy(), rows["end_ns"].to_numpy()

    compute, comm = part(pl.col("kind") == "compute"), part(pl.col("kind") == "comm")
    gpu = (steps["gpu_end_ns"] - steps["gpu_start_ns"]).fill_null(0).to_numpy()
    comm_ns = grouped_lengths(comm, n)
    out = steps.select(*STEP_KEY, (pl.col("cpu_end_ns") - pl.col("cpu_start_ns")).alias("cpu_ns")).with_columns(
        gpu_ns=gpu, compute_ns=grouped_lengths(compute, n), comm_ns=comm_ns,
        memory_ns=grouped_lengths(part(pl.col("kind").is_in(["memcpy", "memset"])), n),
        idle_ns=gpu - grouped_lengths(part(pl.lit(True)), n),
        exposed_comm_ns=comm_ns - grouped_lengths(comm, n, other=compute))
    return out.cast(cast("Mapping[Any, type[pl.DataType]]", BREAKDOWN))


LAUNCH_BOUND_IDLE = 0.2  # a run whose GPUs sat idle more than this share of its steps is launch-bound


def idle_share(breakdown: pl.DataFrame) -> float | None:
    """The median share of a step its GPUs sat idle (``idle_ns / gpu_ns`` of :func:`step_breakdown`'s rows, a
    rank's step a row), None without a step that ran on a GPU."""
    busy = breakdown.filter(pl.col("gpu_ns") > 0)
    return float(cast(float, (busy["idle_ns"] / busy["gpu_ns"]).median())) if busy.height else None


TIMES = {"run_id": pl.String, "step": pl.Int32, "idle_ns": pl.Int64, "exposed_ns": pl.Int64, "beside_ns": pl.Int64}


def cause_times(breakdown: pl.DataFrame) -> pl.DataFrame:
    """Per run and normal step (:data:`TIMES`), the largest over its ranks (:func:`step_breakdown`'s rows) of the
    time its GPU sat idle, of its exposed communication, and of its communication beside computation
    (``comm_ns - exposed_comm_ns``): the most that launching sooner, communication's own time and overlapping can
    each be worth to the step, save what they move besides (the causes' and the what-if's bounds)."""
    out = breakdown.group_by("run_id", "step").agg(
        pl.col("idle_ns").max(), pl.col("exposed_comm_ns").max().alias("exposed_ns"),
        (pl.col("comm_ns") - pl.col("exposed_comm_ns")).max().alias("beside_ns"))
    return out.cast(cast("Mapping[Any, type[pl.DataType]]", TIMES)).sort("run_id", "step")
