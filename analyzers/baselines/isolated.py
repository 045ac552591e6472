"""The isolated (paired) baseline: the median duration of a kernel's signature in a run of the same model and
shapes without communication. Frames carry ``signature`` (the caller keys them)."""

from __future__ import annotations

import polars as pl


def isolated_baseline(isolated_kernels: pl.DataFrame) -> pl.DataFrame:
    """``signature → baseline_ns, baseline_count`` from the compute kernels of an isolated run."""
    compute = isolated_kernels.filter(pl.col("kind") == "compute")
    return compute.group_by("signature").agg(
        pl.col("duration_ns").median().alias("baseline_ns"), pl.len().alias("baseline_count")
    )


def match_rate(kernels: pl.DataFrame, baseline: pl.DataFrame) -> float:
    """Fraction of compute kernels whose signature the baseline has."""
    if kernels.is_empty():
        return 0.0
    have = kernels["signature"].is_in(baseline["signature"].implode())
    return float(have.mean())
