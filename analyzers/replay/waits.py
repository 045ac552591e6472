"""The edges a run's recorded stream waits give its graph (``graph.build``): nsys records each
``cudaStreamWaitEvent`` with the stream and call of the event's record (``WAITS``), so that the first activity
launched on the waiting stream after the wait depends on the last one launched on the recording stream before
the record, and on what that stream had itself waited for since (four streams deep). Found a level of streams
at a time over arrays: a long run records tens of thousands of waits.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import numpy as np
import polars as pl

WAITS = {"run_id": pl.String, "rank": pl.Int32, "stream": pl.Int64, "correlation_id": pl.Int64,
         "waits_stream": pl.Int64, "waits_correlation_id": pl.Int64}


def recorded_edges(ops: pl.DataFrame, waits: pl.DataFrame | None) -> tuple[np.ndarray, np.ndarray]:
    """Edges from the recorded stream waits: the first activity launched on the waiting stream after the wait
    depends on the last activity launched on the recording stream before the record, and on what that stream
    had itself waited for since that activity (through streams that only pass the event on: four deep)."""
    empty = np.empty(0, np.int64)
    if waits is None or waits.is_empty():
        return empty, empty
    keyed = ops.select("node", "run_id", "rank", "stream", "correlation_id").drop_nulls("correlation_id")
    w = waits.select(list(WAITS)).cast(cast("Mapping[Any, type[pl.DataType]]", WAITS))
    # a wait gives an edge only within its rank's calls of ``ops`` (the activity after it and the record before
    # it, and the waits between them, are all among them): the others go first (a window of a long run)
    calls = keyed.group_by("run_id", "rank").agg(pl.col("correlation_id").min().alias("_lo"),
                                                 pl.col("correlation_id").max().alias("_hi"))
    w = w.join(calls, on=["run_id", "rank"]).filter(pl.col("correlation_id").is_between("_lo", "_hi"))
    if w.is_empty():
        return empty, empty
    w = w.drop("_lo", "_hi")
    # every (run, rank, stream) named by an activity or a wait, numbered
    streams = pl.concat([keyed.select("run_id", "rank", "stream"), w.select("run_id", "rank", "stream"),
                         w.select("run_id", "rank", pl.col("waits_stream").alias("stream"))]).unique()
    streams = streams.with_row_index("s").with_columns(pl.col("s").cast(pl.Int64))
    on = ["run_id", "rank", "stream"]
    acts = keyed.join(streams, on=on).sort("s", "correlation_id")
    a_key = _paired(acts["s"].to_numpy(), acts["correlation_id"].to_numpy())
    a_node = acts["node"].to_numpy().astype(np.int64)
    w = (w.join(streams, on=on).join(streams.rename({"stream": "waits_stream", "s": "ws"}),
                                     on=["run_id", "rank", "waits_stream"]).sort("s", "correlation_id"))
    w_key = _paired(w["s"].to_numpy(), w["correlation_id"].to_numpy())
    w_ws, w_wc = w["ws"].to_numpy(), w["waits_correlation_id"].to_numpy().astype(np.int64)
    # the waiting activity of each wait: the first on its stream launched after it
    at = np.searchsorted(a_key, w_key)
    own_stream = (at < len(a_key)) & (a_key[np.minimum(at, len(a_key) - 1)] >> 40 == w_key >> 40)
    origin = a_node[at[own_stream]]
    qs, qc = w_ws[own_stream], w_wc[own_stream]  # what each asks for: the record's stream and call
    nodes, preds = [], []
    for depth in range(5):
        if not len(origin):
            break
        key = _paired(qs, qc)
        i = np.searchsorted(a_key, key) - 1  # the last activity on the stream launched before the record
        found = (i >= 0) & (a_key[np.maximum(i, 0)] >> 40 == qs)
        nodes.append(origin[found])
        preds.append(a_node[i[found]])
        if depth == 4:
            break
        # the waits on that stream since that activity, before the record: the latest for each stream waited for
        after = np.where(found, a_key[np.maximum(i, 0)], _paired(qs, np.full(len(qs), -1, np.int64)))
        lo, hi = np.searchsorted(w_key, after, side="right"), np.searchsorted(w_key, key)
        count = np.maximum(hi - lo, 0)
        query = np.repeat(np.arange(len(qs)), count)
        k = np.repeat(lo - np.cumsum(count) + count, count) + np.arange(count.sum())
        if not len(k):
            break
        latest = pl.DataFrame({"q": query, "ws": w_ws[k], "wc": w_wc[k], "k": k}).group_by("q", "ws").agg(
            pl.col("wc").sort_by("k").last())
        q = latest["q"].to_numpy()
        origin, qs, qc = origin[q], latest["ws"].to_numpy(), latest["wc"].to_numpy()
    if not nodes:
        return empty, empty
    node, pred = np.concatenate(nodes), np.concatenate(preds)
    keep = node != pred
    if not keep.any():
        return empty, empty
    pairs = np.unique(np.stack([node[keep], pred[keep]]), axis=1)
    return pairs[0], pairs[1]


def _paired(stream: np.ndarray, corr: np.ndarray) -> np.ndarray:
    """One sortable key of a stream's number and a call's (correlation ids below 2**40; -1: before any)."""
    return (stream.astype(np.int64) << 40) + corr.astype(np.int64)
