"""Slowdown labels: paired (against an isolated reference: a baseline run or in-run isolated steps) or from
the detector."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from traceql.analyzers.baselines import kinds
from traceql.analyzers.baselines.physical import beyond_ticks, floor
from traceql.analyzers.baselines.twins import KEY_MEDIAN, NONE, TWIN
from traceql.analyzers.detection.features import COLUMNS
from traceql.analyzers.detection.threshold import PAIRED_FACTOR

if TYPE_CHECKING:  # scikit-learn takes a second to import: only when a detector is made
    from traceql.analyzers.detection.detector import SlowdownDetector

ESTIMATE = "estimate"  # the detector's within-trace estimate, not a reference


def paired_labels(features: pl.DataFrame, baselines: pl.DataFrame, factor: float = PAIRED_FACTOR,
                  source: str = "baseline") -> pl.DataFrame:
    """Label against an isolated reference: overlapped and longer than ``factor`` × the kernel's baseline (raised
    to duration − overlap where it is below: ``baselines.physical``), by more than two ticks of the clock
    (``tick_ns``).

    ``baselines`` holds ``_row, baseline_ns, baseline_kind, twin_pos`` (``traceql.analyzers.baselines.twins``) for
    rows of ``features``; a kernel without one (``baseline_kind`` none) is not a case.
    """
    aligned = features.select("_row").join(baselines, on="_row", how="left", maintain_order="left")
    out = features.with_columns(aligned.drop("_row"))  # joined narrow: the wide frame is not copied
    kind = pl.col("baseline_kind").fill_null(NONE)
    isolated = kind.is_in([TWIN, KEY_MEDIAN])
    out = out.with_columns(floor(pl.col("baseline_ns")).alias("baseline_ns"))
    return out.with_columns(
        kind.alias("baseline_kind"),
        pl.when(isolated).then(pl.lit(kinds.TWIN)).otherwise(pl.lit(kinds.NONE)).alias("reference_kind"),
        pl.when(isolated).then(pl.col("key")).alias("twin_key"),
        (pl.col("duration_ns") / pl.col("baseline_ns")).alias("slowdown_ratio"),
        ((pl.col("comm_overlap_ns") > 0) & (pl.col("duration_ns") > factor * pl.col("baseline_ns"))
         & beyond_ticks(pl.col("baseline_ns")))
        .fill_null(False)
        .alias("is_slowdown"),
        pl.lit(source).alias("label_source"),
    ).with_columns(decided())


def detector_labels(features: pl.DataFrame, detector: SlowdownDetector) -> pl.DataFrame:
    """Label with a fitted detector; the baseline is the within-trace estimate (``baseline_kind`` estimate,
    ``reference_kind`` how good it is), or none where the trace holds no reference for the kernel (never a
    case). A case's excess is more than two ticks of the clock (``tick_ns``)."""
    scores = features["score"].to_numpy() if "score" in features.columns else None  # with_scores: not again
    is_case = detector.predict(features.select(COLUMNS).to_numpy(), scores) == -1
    has_reference = pl.col("no_reference") == 0
    return features.with_columns(
        pl.when(has_reference).then(pl.col("estimate_ns")).alias("baseline_ns"),
        pl.when(has_reference).then(pl.lit(ESTIMATE)).otherwise(pl.lit(NONE)).alias("baseline_kind"),
        pl.when(has_reference).then(pl.col("reference_kind")).otherwise(pl.lit(kinds.NONE)).alias("reference_kind"),
        pl.lit(None, pl.String).alias("twin_key"),
        pl.lit(None, pl.Int64).alias("twin_pos"),
        pl.when(has_reference).then(pl.col("duration_ns") / pl.col("estimate_ns")).alias("slowdown_ratio"),
        (pl.lit(pl.Series(is_case)) & beyond_ticks(pl.col("estimate_ns")).fill_null(False)).alias("is_slowdown"),
        pl.lit("detector").alias("label_source"),
    ).with_columns(decided())


UNDECIDED_KINDS = (kinds.CONTAMINATED, kinds.NONE)


def undecided() -> pl.Expr:
    """A kernel that overlapped communication, is not a case and was judged on no reference or on a
    contaminated one (every instance of it ran beside communication): nobody knows whether it was slowed."""
    return ((pl.col("comm_overlap_ns") > 0) & ~pl.col("is_slowdown").fill_null(False)
            & pl.col("reference_kind").is_in(UNDECIDED_KINDS))


def decided() -> pl.Expr:
    """``is_slowdown`` with the undecided kernels' (:func:`undecided`) null: undecided is a label, neither a case
    nor known not to be one (a dataset that counted them as not slowed would be wrong)."""
    return pl.when(undecided()).then(None).otherwise(pl.col("is_slowdown")).alias("is_slowdown")


def with_scores(features: pl.DataFrame, detector: SlowdownDetector) -> pl.DataFrame:
    """Add the detector's ``score`` (IsolationForest score: lower = more abnormal timing) for the kernels it
    judges (overlapped, with a reference); null for the others."""
    scores = detector.candidate_scores(features.select(COLUMNS).to_numpy()) if features.height else np.empty(0)
    return features.with_columns(pl.Series("score", scores, dtype=pl.Float64).fill_nan(None))
