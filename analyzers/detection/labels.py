"""Slowdown labels: paired (against an isolated baseline) or from the detector."""

from __future__ import annotations

import numpy as np
import polars as pl

from analyzers.detection.detector import SlowdownDetector
from analyzers.detection.features import FEATURES

PAIRED_FACTOR = 1.2


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
