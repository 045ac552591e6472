"""Single-trace labels scored with a whole model family held out: one run read once, labelled many ways.

A :class:`Case` is a stock run with twin labels, read and its within-trace estimates made once
(:func:`prepare`); :func:`labels` then labels it at any detector setting and with any table of estimate factors
as ``detect --single-trace`` would (the same functions, in the same order), at the cost of the features and the
forest alone. :func:`by_kind` scores labels per reference kind.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import polars as pl

from traceql.analyzers.baselines.learned import chosen, empty
from traceql.analyzers.baselines.within_trace import within_trace_estimates
from traceql.analyzers.detection.features import COLUMNS, features_of
from traceql.analyzers.detection.threshold import PAIRED_FACTOR
from traceql.labelling.core import decide, feature_inputs, prepared, scored
from traceql.labelling.inputs import read_timeline
from traceql.labelling.modes import LabelSource
from traceql.validation import scoring
from traceql.validation.matrix import MatrixRun, family

if TYPE_CHECKING:
    from traceql.analyzers.detection.detector import SlowdownDetector

Setting = tuple[float, float, float]  # band, contamination, margin


@dataclass
class Case:
    """A stock run ready to be labelled many ways: its prepared compute kernels, their estimates before any
    factor, its GPUs' names and its twin labels (``truth``)."""

    run: MatrixRun
    overlap: pl.DataFrame
    estimates: pl.DataFrame
    gpus: list[str | None]
    truth: pl.DataFrame

    @property
    def family(self) -> str:
        return family(self.run.model)

    @property
    def kind(self) -> str:
        """The GPU kind of its host (``h100``)."""
        return self.run.kind


def prepare(run: MatrixRun, truth: pl.DataFrame) -> Case:
    """``run`` read, its kernels prepared and estimated once, with ``truth`` (its twin labels)."""
    timeline = read_timeline(run.path())
    overlap = prepared(timeline.kernels)
    return Case(run, overlap, within_trace_estimates(feature_inputs(overlap)), list(timeline.gpus), truth)


def detector(setting: Setting, factors: pl.DataFrame | None) -> SlowdownDetector:
    from traceql.analyzers.detection.detector import SlowdownDetector

    band, contamination, margin = setting
    return SlowdownDetector(band=band, contamination=contamination, margin=margin, estimate_factors=factors)


def labels(case: Case, setting: Setting, factors: pl.DataFrame | None) -> pl.DataFrame:
    """``case`` labelled by the detector at ``setting``, its estimates divided by ``factors``
    (``baselines.learned``; an empty table: none; None: the shipped ones where its GPUs are of their kind)."""
    model = detector(setting, factors)
    features = features_of(case.estimates, chosen(factors, case.gpus))
    if not features.is_empty():
        model.fit(features.select(COLUMNS).to_numpy())
    out, _ = decide(scored(case.overlap, features, model), LabelSource.DETECTOR, baseline=None, model=model,
                    threshold=model.threshold)
    return out.select(*scoring.KEY, "duration_ns", "baseline_ns", "reference_kind", "is_slowdown")


def estimate_rows(case: Case) -> pl.DataFrame:
    """What the estimates' factors are learned from (``baselines.learned.learn``): each judged kernel of
    ``case`` with its uncorrected within-trace estimate, its kind, its name's identity and its twin's duration."""
    from traceql.model.names import identity

    truth = case.truth
    judged = truth.filter(scoring.judged(truth)).select(*scoring.KEY, pl.col("baseline_ns").alias("twin_ns"))
    plain = labels(case, (PAIRED_FACTOR, 0.1, 0.0), empty())
    names = case.overlap.select(*scoring.KEY, pl.col("name").cast(pl.String))
    rows = judged.join(plain.select(*scoring.KEY, "reference_kind", pl.col("baseline_ns").alias("estimate_ns")),
                       on=scoring.KEY).join(names, on=scoring.KEY, how="left")
    distinct = rows.select("name").unique().drop_nulls()
    distinct = distinct.with_columns(pl.Series("identity", [identity(n) for n in distinct["name"]], pl.String))
    return rows.join(distinct, on="name", how="left").select(
        pl.lit(case.family).alias("model"), "reference_kind", "identity", "estimate_ns", "twin_ns")


def by_kind(labelled: pl.DataFrame, truth: pl.DataFrame) -> dict[str, scoring.Score]:
    """``labelled`` scored against ``truth`` on the kernels of each reference kind the labels give."""
    kinds = truth.filter(scoring.judged(truth)).select(scoring.KEY).join(
        labelled.select(*scoring.KEY, "reference_kind"), on=scoring.KEY, how="left")
    out = {}
    for kind in sorted(kinds["reference_kind"].drop_nulls().unique()):
        mine = kinds.filter(pl.col("reference_kind") == kind).select(scoring.KEY)
        out[kind] = scoring.score(labelled.join(mine, on=scoring.KEY, how="semi"),
                                  truth.join(mine, on=scoring.KEY, how="semi"))
    return out
