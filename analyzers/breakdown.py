"""Per-rank time breakdown and communication/computation overlap (Holistic Trace Analysis definitions).

- ``comm_comp_overlap_pct``: time where compute and communication kernels run together / time
  communication runs, × 100 (unions of intervals per rank).
- ``span_ns``: first GPU activity start to last end; ``idle_ns``: span minus the union of all GPU activity;
  ``compute_ns``/``comm_ns``/``memory_ns``: unions of compute kernels, comm kernels, memcpy+memset;
  ``non_compute_ns`` = span − idle − compute.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import polars as pl

RANK_KEY = ["run_id", "rank"]
BREAKDOWN_SCHEMA = {"run_id": pl.String, "rank": pl.Int32, **dict.fromkeys(
    ["span_ns", "busy_ns", "idle_ns", "compute_ns", "comm_ns", "memory_ns", "non_compute_ns",
     "comm_compute_overlap_ns"], pl.Int64), "comm_comp_overlap_pct": pl.Float64}


# the kinds of GPU activity by code (a narrow column for a sort of millions of rows), and which codes each
# part of the breakdown unites (busy: every activity)
KIND_CODES = {"compute": 0, "comm": 1, "memcpy": 2, "memset": 3}
CATEGORIES: dict[str, tuple[int, ...] | None] = {"busy": None, "compute": (0,), "comm": (1,), "memory": (2, 3),
                                                 "both": (0, 1)}
Batch = tuple[np.ndarray, np.ndarray, np.ndarray]  # starts, ends, kind codes of intervals in start order


class _Unions:
    """The length of the union of each category's intervals, given in start order a batch at a time: each
    interval adds what reaches past every earlier one's end (``reach``, carried from batch to batch)."""

    def __init__(self) -> None:
        self.length = dict.fromkeys(CATEGORIES, 0)
        self.reach = dict.fromkeys(CATEGORIES, np.iinfo(np.int64).min)
        self.first, self.last = None, None

    def add(self, starts: np.ndarray, ends: np.ndarray, codes: np.ndarray) -> None:
        if not len(starts):
            return
        self.first = starts[0] if self.first is None else self.first
        self.last = ends.max() if self.last is None else max(self.last, ends.max())
        for name, kinds in CATEGORIES.items():
            s, e = (starts, ends) if kinds is None else (starts[mine := np.isin(codes, kinds)], ends[mine])
            if not len(s):
                continue
            before = np.maximum.accumulate(np.concatenate([[self.reach[name]], e[:-1]]))
            self.length[name] += int(np.maximum(0, e - np.maximum(s, before)).sum())
            self.reach[name] = max(self.reach[name], int(e.max()))


def rank_breakdown_batches(ranks: Iterable[tuple[str, int, Iterable[Batch]]]) -> pl.DataFrame:
    """:func:`rank_breakdown` of each rank's activity given as batches of intervals in start order (``run_id,
    rank, batches``; kinds as :data:`KIND_CODES`): the same figures, from one pass over the activity, holding a
    batch at a time (a rank too large to hold)."""
    rows = []
    for run_id, rank, batches in ranks:
        unions = _Unions()
        for starts, ends, codes in batches:
            unions.add(starts, ends, codes)
        n = unions.length
        span = int(unions.last - unions.first) if unions.first is not None else 0
        both = n["compute"] + n["comm"] - n["both"]  # |A ∩ B| = |A| + |B| − |A ∪ B|
        rows.append({
            "run_id": run_id, "rank": rank, "span_ns": span, "busy_ns": n["busy"], "idle_ns": span - n["busy"],
            "compute_ns": n["compute"], "comm_ns": n["comm"], "memory_ns": n["memory"],
            "non_compute_ns": n["busy"] - n["compute"], "comm_compute_overlap_ns": both,
            "comm_comp_overlap_pct": round(100.0 * both / n["comm"], 2) if n["comm"] else None,
        })
    return pl.DataFrame(rows, schema=BREAKDOWN_SCHEMA).sort(RANK_KEY)


def rank_breakdown(kernels: pl.DataFrame, memops: pl.DataFrame) -> pl.DataFrame:
    """One row per (run_id, rank): the time breakdown and the comm/compute overlap percentage."""
    cols = [*RANK_KEY, "start_ns", "end_ns", "kind"]
    activity = pl.concat([kernels.select(cols), memops.select(cols)]).with_columns(
        pl.col("kind").replace_strict(KIND_CODES, default=len(KIND_CODES), return_dtype=pl.UInt8))
    ranks = []
    for (run_id, rank), grp in activity.group_by(RANK_KEY, maintain_order=True):
        grp = grp.sort("start_ns")
        ranks.append((run_id, rank, [(grp["start_ns"].to_numpy(), grp["end_ns"].to_numpy(), grp["kind"].to_numpy())]))
    return rank_breakdown_batches(ranks)
