"""Whether an isolated run fits a trace: the share of its compute kernels whose signature the run has (a coarse
check that it is the same model and shapes; the labels themselves compare twins, ``twins``)."""

from __future__ import annotations

import polars as pl


def match_rate(kernels: pl.DataFrame, baseline: pl.DataFrame) -> float:
    """Fraction of compute kernels whose signature the baseline has."""
    if kernels.is_empty():
        return 0.0
    have = kernels["signature"].is_in(baseline["signature"].implode())
    return float(have.mean())
