"""What slowdown labels add up to: time lost, per rank and per signature (the data of the reports)."""

from __future__ import annotations

import polars as pl


def time_lost() -> pl.Expr:
    """Σ (duration − baseline) over slowdown cases, in ns."""
    lost = (pl.col("duration_ns") - pl.col("baseline_ns")).filter(pl.col("is_slowdown"))
    return lost.sum().fill_null(0).round(0).cast(pl.Int64)


def rank_parts(labelled: pl.DataFrame) -> pl.DataFrame:
    """Per (run_id, rank) of some of its kernels: compute kernels, slowdown cases and time lost (not rounded
    yet): parts of a rank add up (:func:`rank_totals`)."""
    lost = (pl.col("duration_ns") - pl.col("baseline_ns")).filter(pl.col("is_slowdown"))
    return labelled.group_by("run_id", "rank").agg(
        pl.len().alias("compute_kernels"),
        pl.col("is_slowdown").sum().cast(pl.Int64).alias("cases"),
        lost.sum().fill_null(0).alias("time_lost_ns"),
    )


def rank_totals(parts: pl.DataFrame) -> pl.DataFrame:
    """Per (run_id, rank): the :func:`rank_parts` summed, the time lost rounded to the ns."""
    return parts.group_by("run_id", "rank", maintain_order=True).agg(
        pl.col("compute_kernels", "cases").sum(),
        pl.col("time_lost_ns").sum().round(0).cast(pl.Int64))


def rank_cases(labelled: pl.DataFrame) -> pl.DataFrame:
    """Per (run_id, rank): compute kernels, slowdown cases and time lost."""
    return rank_totals(rank_parts(labelled))


CASE_COLUMNS = ["run_id", "signature", "short_name", "name", "slowdown_ratio", "duration_ns", "baseline_ns",
                "is_slowdown", "concurrent_comm"]  # what :func:`top_of` reads of a case


def signature_instances(labelled: pl.DataFrame) -> pl.DataFrame:
    """``run_id, signature, instances``: how many compute kernels of each signature ran."""
    return labelled.group_by("run_id", "signature").agg(pl.len().cast(pl.Int64).alias("instances"))


def top_of(cases: pl.DataFrame, instances: pl.DataFrame, top: int) -> pl.DataFrame:
    """The slowed signatures of each run by time lost, from the cases (:data:`CASE_COLUMNS`, in the run's
    order) and every signature's instances (:func:`signature_instances`: counts of ranks read apart add up)."""
    instances = instances.group_by("run_id", "signature").agg(pl.col("instances").sum())
    return (
        cases.group_by("run_id", "signature")
        .agg(
            pl.col("short_name").first(),
            pl.col("name").mode().sort().first().alias("name"),
            pl.len().cast(pl.Int64).alias("cases"),
            pl.col("slowdown_ratio").median().round(3).alias("median_ratio"),
            time_lost().alias("time_lost_ns"),
            pl.col("concurrent_comm").drop_nulls().mode().sort().first().alias("concurrent_comm"),
        )
        .join(instances, on=["run_id", "signature"])
        .sort(["time_lost_ns", "run_id", "signature"], descending=[True, False, False])
        .head(top)
        .select("run_id", "signature", "short_name", "name", "cases", "instances", "median_ratio", "time_lost_ns",
                "concurrent_comm")
    )


def top_signatures(labelled: pl.DataFrame, top: int) -> pl.DataFrame:
    """The slowed signatures of each run by time lost: cases, median slowdown ratio, typical concurrent
    collective."""
    cases = labelled.filter(pl.col("is_slowdown")).select(CASE_COLUMNS)
    return top_of(cases, signature_instances(labelled), top)
