"""Communication at its unoverlapped speed: what each collective's transfer (its ``tail``, from its last member's
start to its end) would take with no computation beside it.

A collective that ran while its rank computed took longer than alone: its kernel waited for the compute kernels
holding the SMs before it could start moving data, then shared the SMs and the memory with them. The model
(:class:`CommAlone`): alone, a member's tail is its measured tail less ``wait_ns`` where any computation
overlapped it, less ``share`` of the time computation overlapped it. Message sizes would allow a bandwidth
model, but the exports do not carry them (NCCL's NVTX payloads are not exported), so the two constants are
fitted on real runs of serialized communication against their overlapped twins (the ground-truth matrix).

:func:`tails` gives each member's tail and overlap (what the fit reads); :func:`alone_tails` the tails alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl

from traceql.analyzers.replay.graph import RunGraph


@dataclass(frozen=True)
class CommAlone:
    """How much longer a collective's transfer took while computation overlapped it (module doc)."""

    wait_ns: float = 9_800.0  # fitted on every configuration of the matrix (docs/validation.md)
    share: float = 0.127
    floor: float = 0.25  # a tail alone is never shorter than this share of the tail measured


def overlapped(rg: RunGraph) -> np.ndarray:
    """Per activity (node order), the time computation of its rank overlapped its tail (0 where not a member of a
    collective)."""
    n, g = rg.n_ops, rg.graph
    out = np.zeros(n, np.int64)
    member = np.flatnonzero(g.group[:n] >= 0)
    if not len(member):
        return out
    start, end = rg.measured.start[:n], rg.measured.end[:n]
    lane = rg.rank_key + 1
    compute = (rg.ops["kind"] == "compute").to_numpy()
    for key in np.unique(lane[member]):
        mine = member[lane[member] == key]
        busy = np.flatnonzero(compute & (lane == key))
        if not len(busy):
            continue
        covered = coverage(start[busy], end[busy])
        out[mine] = covered(end[mine]) - covered(end[mine] - g.tail[mine])
    return out


def coverage(start: np.ndarray, end: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """``f(t)``: the time the union of the intervals covers before ``t`` (vectorised over ``t``)."""
    o = np.argsort(start, kind="stable")
    s, e = start[o], np.maximum.accumulate(end[o])
    new = np.r_[True, s[1:] > e[:-1]]  # an interval that starts a new piece of the union
    piece = np.cumsum(new) - 1
    us = s[new]
    ue = np.zeros(len(us), np.int64)
    np.maximum.at(ue, piece, e)
    before = np.r_[0, np.cumsum(ue - us)]

    def covered(t: np.ndarray) -> np.ndarray:
        i = np.searchsorted(us, t, side="right") - 1
        j = np.maximum(i, 0)
        inside = np.clip(t - us[j], 0, ue[j] - us[j])
        return np.where(i >= 0, before[j] + inside, 0)

    return covered


def tails(rg: RunGraph) -> pl.DataFrame:
    """Every member of a collective: ``run_id``, ``rank``, ``step``, ``collective``, ``index`` (the k-th of its
    collective in the step, on its rank), ``tail`` and ``overlap`` (ns)."""
    n = rg.n_ops
    ov = overlapped(rg)
    frame = rg.ops.select("run_id", "rank", "step", "collective", "start_ns").with_columns(
        pl.Series("tail", rg.graph.tail[:n]), pl.Series("overlap", ov), pl.Series("group", rg.graph.group[:n]))
    return (frame.filter(pl.col("group") >= 0).sort("start_ns")
            .with_columns(pl.int_range(pl.len()).over("run_id", "rank", "step", "collective").alias("index"))
            .drop("start_ns", "group"))


def alone_tails(rg: RunGraph, model: CommAlone) -> np.ndarray:
    """Every node's tail with the collectives at their speed alone (``model``)."""
    n, tail = rg.n_ops, rg.graph.tail.copy()
    ov = overlapped(rg).astype(np.float64)
    cut = np.where(ov > 0, model.wait_ns + model.share * ov, 0.0)
    member = rg.graph.group[:n] >= 0
    alone = np.maximum(tail[:n] - cut, model.floor * tail[:n])
    tail[:n] = np.where(member, np.round(alone), tail[:n]).astype(np.int64)
    return tail


def fit(pairs: list[tuple[pl.DataFrame, pl.DataFrame]]) -> CommAlone:
    """The model that best turns overlapped tails into serialized ones: ``pairs`` of :func:`tails` of a run and of
    a run of the same configuration with its communication serialized. Per pair, per rank and step (the first
    captured step left out), the tails' sum less the serialized run's, the collectives computation overlapped
    and their overlap, medians over them; least squares of the first on the other two."""
    rows = []
    on = ["rank", "step", "collective", "index"]
    for stock, serial in pairs:
        both = stock.join(serial.select(*on, pl.col("tail").alias("alone")), on=on)
        both = both.filter(pl.col("step") > both["step"].min())
        per = both.group_by("rank", "step").agg((pl.col("tail") - pl.col("alone")).sum().alias("gain"),
                                                (pl.col("overlap") > 0).sum().alias("count"),
                                                pl.col("overlap").sum().alias("overlap"))
        if per.height:
            rows.append(per.select(pl.col("gain", "count", "overlap").median()).row(0))
    if not rows:
        return CommAlone()
    data = np.asarray(rows, np.float64)
    (wait, share), *_ = np.linalg.lstsq(data[:, 1:], data[:, 0], rcond=None)
    return CommAlone(wait_ns=round(max(float(wait), 0.0), -2), share=round(min(max(float(share), 0.0), 1.0), 3))
