"""Whether an isolated run fits a trace: the share of its compute kernels whose signature the run has (a coarse
check that it is the same model and shapes; the labels themselves compare twins, ``twins``)."""

from __future__ import annotations

import polars as pl

from traceql.analyzers.steps import STEP_KEY


def match_rate(kernels: pl.DataFrame, baseline: pl.DataFrame) -> float:
    """Fraction of compute kernels whose signature the baseline has."""
    if kernels.is_empty():
        return 0.0
    have = kernels["signature"].is_in(baseline["signature"].implode())
    return float(have.mean())



def communicating(kernels: pl.DataFrame) -> pl.DataFrame:
    """The isolated steps (``run_id, rank, step``, with ``comm``: how many communication kernels they launched)
    that ran with communication: no reference, since contention may have slowed them too (FSDP and tensor
    parallelism cannot run a step without it)."""
    return (kernels.filter((pl.col("step_kind") == "isolated") & (pl.col("kind") == "comm"))
            .group_by(STEP_KEY).agg(pl.len().alias("comm")).sort(STEP_KEY))


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
