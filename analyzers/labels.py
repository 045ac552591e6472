"""Slowdown labels (paired or detector) and what they add up to per rank and per signature."""

from __future__ import annotations

import numpy as np
import polars as pl

from analyzers.detector import SlowdownDetector
from analyzers.features import FEATURES

PAIRED_FACTOR = 1.2
CASE_SCHEMA = {
    "run_id": pl.String, "rank": pl.Int32, "device": pl.Int32, "stream": pl.Int64, "start_ns": pl.Int64,
    "end_ns": pl.Int64, "duration_ns": pl.Int64, "name": pl.String, "signature": pl.String,
    "comm_overlap_ns": pl.Int64, "comm_overlap_frac": pl.Float64, "concurrent_comm": pl.String,
    "baseline_ns": pl.Float64, "slowdown_ratio": pl.Float64, "score": pl.Float64, "is_slowdown": pl.Boolean,
    "label_source": pl.String,
}
CASE_COLUMNS = list(CASE_SCHEMA)


def paired_labels(features: pl.DataFrame, baseline: pl.DataFrame, factor: float = PAIRED_FACTOR) -> pl.DataFrame:
    """Label against an isolated baseline: overlapped and longer than ``factor`` × the signature's median.

    Kernels whose signature the baseline lacks get ``baseline_ns`` null and are not cases.
    """
    out = features.join(baseline.select("signature", "baseline_ns"), on="signature", how="left", maintain_order="left")
    return out.with_columns(
        (pl.col("duration_ns") / pl.col("baseline_ns")).alias("slowdown_ratio"),
        ((pl.col("comm_overlap_ns") > 0) & (pl.col("duration_ns") > factor * pl.col("baseline_ns")))
        .fill_null(False)
        .alias("is_slowdown"),
        pl.lit("baseline").alias("label_source"),
    )


def detector_labels(features: pl.DataFrame, detector: SlowdownDetector) -> pl.DataFrame:
    """Label with a fitted detector; the baseline is the within-trace estimate."""
    is_case = detector.predict(features.select(FEATURES).to_numpy()) == -1
    return features.with_columns(
        pl.col("estimate_ns").alias("baseline_ns"),
        (pl.col("duration_ns") / pl.col("estimate_ns")).alias("slowdown_ratio"),
        pl.Series("is_slowdown", is_case),
        pl.lit("detector").alias("label_source"),
    )


def with_scores(features: pl.DataFrame, detector: SlowdownDetector) -> pl.DataFrame:
    """Add the detector's ``score`` (IsolationForest score: lower = more abnormal timing)."""
    scores = detector.score_samples(features.select(FEATURES).to_numpy()) if features.height else np.empty(0)
    return features.with_columns(pl.Series("score", scores, dtype=pl.Float64))


def time_lost() -> pl.Expr:
    """Σ (duration − baseline) over slowdown cases, in ns."""
    lost = (pl.col("duration_ns") - pl.col("baseline_ns")).filter(pl.col("is_slowdown"))
    return lost.sum().fill_null(0).round(0).cast(pl.Int64)


def rank_cases(labelled: pl.DataFrame) -> pl.DataFrame:
    """Per (run_id, rank): compute kernels, slowdown cases and time lost."""
    return labelled.group_by("run_id", "rank").agg(
        pl.len().alias("compute_kernels"),
        pl.col("is_slowdown").sum().cast(pl.Int64).alias("cases"),
        time_lost().alias("time_lost_ns"),
    )


def top_signatures(labelled: pl.DataFrame, top: int = 10) -> pl.DataFrame:
    """The slowed signatures by time lost: cases, median slowdown ratio, typical concurrent collective."""
    cases = labelled.filter(pl.col("is_slowdown"))
    if cases.is_empty():
        return pl.DataFrame(schema={"signature": pl.String, "short_name": pl.String, "cases": pl.Int64,
                                    "instances": pl.Int64, "median_ratio": pl.Float64, "time_lost_ns": pl.Int64,
                                    "concurrent_comm": pl.String})
    instances = labelled.group_by("signature").agg(pl.len().cast(pl.Int64).alias("instances"))
    return (
        cases.group_by("signature")
        .agg(
            pl.col("short_name").first(),
            pl.len().cast(pl.Int64).alias("cases"),
            pl.col("slowdown_ratio").median().round(3).alias("median_ratio"),
            time_lost().alias("time_lost_ns"),
            pl.col("concurrent_comm").drop_nulls().mode().sort().first().alias("concurrent_comm"),
        )
        .join(instances, on="signature")
        .sort(["time_lost_ns", "signature"], descending=[True, False])
        .head(top)
        .select("signature", "short_name", "cases", "instances", "median_ratio", "time_lost_ns", "concurrent_comm")
    )
