"""What a slowdown case can physically be.

- **Overlap bounds the excess.** Contention stretches only the part of a kernel that communication
  overlapped: a kernel that ran ``overlap`` ns next to communication lost at most that much, so its unslowed
  duration is at least ``duration − overlap`` (true for 99.9 % of the twin cases of every pair we hold). Any
  reference below that is raised to it (:func:`floor`).
- **The clock's tick.** Some traces carry whole-microsecond timestamps (older Kineto): a duration is then
  off by up to a tick at either end, and an excess within :data:`TICKS` ticks cannot be told from that. The
  tick is read from the data (:func:`clock_ticks`): the largest power of ten dividing every start and end.
"""

from __future__ import annotations

import numpy as np
import polars as pl

TICKS = 2  # an excess must be over this many clock ticks to be a case
TICK_SAMPLE = 4096  # timestamps per run the tick is read from (a tick found on them holds for nearly all)
POWERS = (1_000_000, 100_000, 10_000, 1_000, 100, 10)  # candidate ticks, coarsest first


ORDER = ["run_id", "rank", "start_ns", "device", "stream", "end_ns", "correlation_id"]  # the model's kernel order


def tick_samples(kernels: pl.DataFrame) -> pl.DataFrame:
    """The first :data:`TICK_SAMPLE` kernels of each run, in the frame's order, with the columns that order is
    made of (:data:`ORDER`): all :func:`ticks` reads (the samples of parts of a run give the run's)."""
    return kernels.select(ORDER).group_by("run_id", maintain_order=True).head(TICK_SAMPLE)


def ticks(samples: pl.DataFrame) -> pl.DataFrame:
    """``run_id, tick_ns``: each run's clock resolution, the coarsest power of ten (ns) that divides every start
    and end of its first :data:`TICK_SAMPLE` kernels (1 when none does, as on nsys' nanosecond clock)."""
    samples = samples.sort(ORDER, nulls_last=True, maintain_order=True)  # parts' samples in the run's order
    rows = []
    for (run_id,), run in samples.group_by(["run_id"], maintain_order=True):
        stamps = np.concatenate([run["start_ns"].head(TICK_SAMPLE).to_numpy(),
                                 run["end_ns"].head(TICK_SAMPLE).to_numpy()])
        tick = next((p for p in POWERS if stamps.size and not np.any(stamps % p)), 1)
        rows.append((run_id, tick))
    return pl.DataFrame(rows, schema={"run_id": samples.schema["run_id"], "tick_ns": pl.Int64}, orient="row")


def clock_ticks(kernels: pl.DataFrame) -> pl.DataFrame:
    """``run_id, tick_ns`` of every run of ``kernels`` (:func:`ticks` of its :func:`tick_samples`)."""
    return ticks(tick_samples(kernels))


def floor(reference: pl.Expr) -> pl.Expr:
    """``reference`` raised to ``duration_ns − comm_overlap_ns`` where communication overlapped the kernel (an
    unoverlapped kernel keeps its reference: nothing bounds it, and its ratio shows the reference's noise)."""
    least = (pl.col("duration_ns") - pl.col("comm_overlap_ns")).cast(pl.Float64)
    bounded = (pl.col("comm_overlap_ns") > 0) & reference.is_not_null()
    return pl.when(bounded).then(pl.max_horizontal(reference, least)).otherwise(reference)


def beyond_ticks(baseline: pl.Expr) -> pl.Expr:
    """Whether the excess over ``baseline`` is more than :data:`TICKS` of the run's clock (``tick_ns``)."""
    return (pl.col("duration_ns") - baseline) > TICKS * pl.col("tick_ns")
