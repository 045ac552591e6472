"""Every what-if figure with the error it has earned: an interval made of the run's own step-to-step spread (the
median's order-statistic bounds, ``analyzers.spread``) widened by the worst error its class of run showed on the
validated configurations (``measured.RunClass``). A figure its class never validated gets none (null).

Per step, ``<column>_low_ns`` / ``<column>_high_ns`` beside ``serialized_ns``, ``without_straggler_ns`` and
``bucket_cap_ns``: the step's figure less and plus its class's worst error. Per run, the median over its judged
steps: the step medians' bounds widened the same way, and what overlapping saves (serialized less replayed,
step by step) widened by the serialized error of a median step.
"""

from __future__ import annotations

from typing import cast

import polars as pl

from traceql.analyzers.spread import median_bounds
from traceql.verdicts.measured import RunClass

COLUMNS = {"serialized_ns": "serialized", "without_straggler_ns": "straggler", "bucket_cap_ns": "cap"}


def step_bounds(steps: pl.DataFrame, cls: RunClass) -> pl.DataFrame:
    """``steps`` (``analyzers.replay.STEPS``) with ``<column>_low_ns`` and ``<column>_high_ns`` for each of
    :data:`COLUMNS` (Int64; null where the class never validated that figure, or the step has none)."""
    out = []
    for column, figure in COLUMNS.items():
        e = cls.error(figure)
        value = pl.col(column).cast(pl.Float64)
        for side, sign in (("low", -1.0), ("high", 1.0)):
            expr = (value * (1.0 + sign * e)).round(0).cast(pl.Int64) if e is not None else pl.lit(None, pl.Int64)
            out.append(expr.alias(f"{column.removesuffix('_ns')}_{side}_ns"))
    return steps.with_columns(out)


def run_bounds(judged: pl.DataFrame, cls: RunClass, has_comm: bool) -> dict[str, list[int] | None]:
    """Per run (``judged``: its steps, the first captured step left out), the interval of each figure's median:
    ``serialized_ns``, ``bucket_cap_ns``, ``without_straggler_ns`` and ``overlap_saves_ns`` (module doc); None
    where its class never validated it, or the run has no such figure."""
    out: dict[str, list[int] | None] = {}
    step = _median(judged["replayed_ns"]) if judged.height else None
    for column, figure in COLUMNS.items():
        e = cls.error(figure)
        values = judged[column].drop_nulls() if column in judged.columns else pl.Series([], dtype=pl.Int64)
        if e is None or values.is_empty():
            out[column] = None
            continue
        low, high, _ = median_bounds(values.to_numpy())
        out[column] = [round(low * (1 - e)), round(high * (1 + e))]
    e = cls.error("serialized")
    saves = (judged["serialized_ns"] - judged["replayed_ns"]).drop_nulls() if judged.height else None
    if e is None or not has_comm or saves is None or saves.is_empty() or step is None:
        out["overlap_saves_ns"] = None
    else:
        low, high, _ = median_bounds(saves.to_numpy())
        out["overlap_saves_ns"] = [round(low - e * step), round(high + e * step)]
    return out


def _median(values: pl.Series) -> float | None:
    m = values.median()
    return None if m is None else float(cast(float, m))
