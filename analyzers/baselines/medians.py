"""Exact medians per group over millions of rows, sorted in numpy: a fraction of the memory of a group-by median.

The median of an even count is the mean of the two middle values, as polars computes it (for durations, whole
nanoseconds below 2**53, the same float to the bit).
"""

from __future__ import annotations

from typing import cast

import numpy as np
import polars as pl


def _codes(column: pl.Series) -> tuple[np.ndarray, object]:
    """A group column as integers to sort by (nulls as one more value), and that value."""
    physical = column.to_physical()
    null = int(cast("int | None", physical.max()) or 0) + 1 if physical.null_count() else None
    return physical.fill_null(null or 0).to_numpy(), null


def group_medians(frame: pl.DataFrame, by: list[str], value: str, name: str) -> pl.DataFrame:
    """``by`` and ``name``: the median of ``value`` (as a float) in each group of ``by`` (a null among them a
    group of its own, as in a group-by)."""
    if frame.is_empty():
        return frame.select(*by, pl.col(value).cast(pl.Float64).alias(name)).head(0)
    codes = [_codes(frame[c])[0] for c in by]
    values = frame[value].to_numpy()
    order = np.lexsort((values, *reversed(codes)))
    sorted_codes = [c[order] for c in codes]
    change = np.zeros(len(order), bool)
    change[0] = True
    for c in sorted_codes:
        change[1:] |= c[1:] != c[:-1]
    starts = np.flatnonzero(change)
    counts = np.diff(np.append(starts, len(order)))
    low = values[order[starts + (counts - 1) // 2]].astype(np.float64)
    high = values[order[starts + counts // 2]].astype(np.float64)
    firsts = order[starts]
    del order, sorted_codes
    return frame[firsts].select(by).with_columns(pl.Series(name, (low + high) / 2.0))
