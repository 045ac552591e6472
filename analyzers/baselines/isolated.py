"""Whether an isolated run fits a trace: the share of its compute kernels whose signature the run has (a coarse
check that it is the same model and shapes; the labels themselves compare twins, ``twins``)."""

from __future__ import annotations

from typing import cast

import polars as pl

from traceql.analyzers.step_breakdown import STEP_KEY


def match_rate(kernels: pl.DataFrame, baseline: pl.DataFrame) -> float:
    """Fraction of compute kernels whose signature the baseline has."""
    if kernels.is_empty():
        return 0.0
    have = kernels["signature"].is_in(baseline["signature"].implode())
    return float(cast(float, have.mean()))



GRADIENT = ("AllReduce", "ReduceScatter")  # the collectives that reduce gradients (and tensor parallelism's)


def _isolated_comm(kernels: pl.DataFrame) -> pl.DataFrame:
    return kernels.filter((pl.col("step_kind") == "isolated") & (pl.col("kind") == "comm")).with_columns(
        pl.col("collective").cast(pl.String).fill_null("").str.contains(f"^({'|'.join(GRADIENT)})")
        .alias("_gradient"))


def communicating(kernels: pl.DataFrame) -> pl.DataFrame:
    """The isolated steps (``run_id, rank, step``, with ``comm``: how many reducing collectives they launched)
    that reduced gradients (or activations: tensor parallelism's all-reduces): no reference, since that
    communication runs beside the computation it is compared with (FSDP and tensor parallelism cannot run a
    step without it). A broadcast of DDP's buffers before the forward is not: it reduces nothing and overlaps
    little (:func:`clean_reference` leaves out what it overlapped)."""
    return (_isolated_comm(kernels).filter(pl.col("_gradient"))
            .group_by(STEP_KEY).agg(pl.len().alias("comm")).sort(STEP_KEY))


def other_comm(kernels: pl.DataFrame) -> pl.DataFrame:
    """Per run, the communication kernels of its isolated steps that reduce nothing (``comm``: how many,
    ``collectives``: which, e.g. ``Broadcast``), where the steps stay a reference."""
    return (_isolated_comm(kernels).filter(~pl.col("_gradient"))
            .group_by("run_id", maintain_order=True)
            .agg(pl.len().alias("comm"), pl.col("collective").cast(pl.String).str.split("/").list.first()
                 .unique(maintain_order=True).alias("collectives")))


def clean_reference() -> pl.Expr:
    """Of the isolated steps' kernels, those that are a reference: none that overlapped communication (a buffer
    broadcast that ran beside them), each left out on its own."""
    return (pl.col("step_kind") == "isolated").fill_null(False) & (pl.col("comm_overlap_ns").fill_null(0) == 0)


def outside_steps(frame: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with its rows of the isolated ``steps`` (``run_id, rank, step``) outside any step (``step``
    and ``step_kind`` null): neither a reference nor a normal step."""
    if steps.is_empty() or frame.is_empty():
        return frame
    hit = (frame.select(*STEP_KEY, "step_kind")
           .join(steps.select(STEP_KEY).with_columns(pl.lit(True).alias("_hit")), on=STEP_KEY, how="left",
                 maintain_order="left")
           .select((pl.col("_hit").fill_null(False) & (pl.col("step_kind") == "isolated")).fill_null(False))
           .to_series())
    if not hit.any():
        return frame
    return frame.with_columns(pl.when(hit).then(None).otherwise(pl.col(c)).alias(c) for c in ("step", "step_kind"))
