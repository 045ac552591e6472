"""`dataset summary`: cases, time lost and the slowdown ratio distribution per model and configuration."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from traceql.dataset.store import Dataset


def training_rows(rows: pl.LazyFrame) -> pl.LazyFrame:
    """``rows`` of a dataset without those of its isolated steps (``baseline_kind`` reference): a reference,
    not training, counted by no total."""
    if "baseline_kind" in rows.collect_schema().names():
        return rows.filter(pl.col("baseline_kind").fill_null("") != "reference")
    return rows


def summary(root: str | Path) -> pl.DataFrame:
    """Per model and configuration: entries, kernel rows, cases, undecided rows (``is_slowdown`` null), the cases'
    share of the decided rows (``case_pct``), time lost, slowdown ratio distribution. The rows of isolated steps
    (``baseline_kind`` reference) are a reference, not training: not counted."""
    ds = Dataset(root)
    rows = training_rows(ds.scan())
    case = pl.col("is_slowdown")
    ratio = pl.col("slowdown_ratio").filter(case)
    return ds.collect(
        rows.group_by("model", "config")
        .agg(pl.col("entry_id").n_unique().alias("entries"), pl.len().alias("rows"),
             case.sum().cast(pl.Int64).alias("cases"),
             case.null_count().cast(pl.Int64).alias("undecided"),
             (case.mean() * 100).round(2).alias("case_pct"),
             ((pl.col("duration_ns") - pl.col("baseline_ns")).filter(case).sum() / 1e6).round(3)
             .alias("time_lost_ms"),
             ratio.median().round(3).alias("ratio_median"), ratio.quantile(0.9).round(3).alias("ratio_p90"),
             ratio.max().round(3).alias("ratio_max"))
        .sort("model", "config")
    )
