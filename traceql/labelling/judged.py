"""The rows the detector is fitted on, where a run was labelled a shard at a time (``by_rank``): gathered from
the shards' stored files in the run's kernel order, as the whole run read at once gives them (only the rows a
detector samples are read)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from traceql.analyzers.baselines.physical import ORDER
from traceql.analyzers.detection.features import COLUMNS


def detector_matrix(frames: list[pl.DataFrame], windowed: bool) -> np.ndarray:
    """Rows of several shards as the detector takes them, in the run's kernel order."""
    if not frames:
        return np.empty((0, len(COLUMNS)))
    rows = pl.concat(frames, how="vertical_relaxed")
    if windowed:
        rows = rows.sort(ORDER, nulls_last=True, maintain_order=True)
    return rows.select(COLUMNS).to_numpy()


def sampled_rows(paths: list[Path], counts: list[int], rows: np.ndarray, windowed: bool) -> np.ndarray:
    """Rows ``rows`` (sorted places in the run's order) of the judged rows the shards stored at ``paths``
    (``counts`` each), as :func:`detector_matrix` gives them: one shard's rows read at a time, and of
    windows first their order columns alone."""
    if windowed:  # the run's order is the order columns' sort: found from those alone
        keys = pl.concat([pl.read_ipc(p, columns=ORDER).with_columns(pl.lit(i, pl.Int32).alias("_shard"))
                          .with_row_index("_local") for i, p in enumerate(paths)], how="vertical_relaxed")
        picked = keys.sort(ORDER, nulls_last=True, maintain_order=True)[rows].select("_shard", "_local")
        del keys
    else:
        shard = np.searchsorted(np.cumsum(counts), rows, side="right")
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        picked = pl.DataFrame({"_shard": shard.astype(np.int32), "_local": (rows - starts[shard]).astype(np.uint32)})
    picked = picked.with_row_index("_place")
    parts = []
    for i, p in enumerate(paths):
        mine = picked.filter(pl.col("_shard") == i)
        if mine.height:
            parts.append(pl.read_ipc(p, columns=COLUMNS)[mine["_local"]].with_columns(mine["_place"]))
    return pl.concat(parts).sort("_place").select(COLUMNS).to_numpy()
