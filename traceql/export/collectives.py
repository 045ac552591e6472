"""The report's collectives section: each instance's bus bandwidth against the link's peak, each step's arrival
skew and the rank that arrived last, and the instances of a step across the steps (``analyzers.collectives``),
from the ``collectives`` relation the command read."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import cast

import polars as pl

from traceql.analyzers import collectives as coll
from traceql.analyzers.units import size
from traceql.export import figures
from traceql.export.html import figure, table

UNSIZED = ("No collective carries a size: the trace records none (torch.profiler records them; nsys exports "
           "NCCL's with --include-blobs=true), nor does a DDP bucket fit them, so no bus bandwidth is drawn.")


def section(rows: pl.DataFrame, runs: Sequence[str], first: Mapping[str, int], notes: Sequence[str]) -> str:
    """The section's markup for each of ``runs``: ``rows``, the ``collectives`` relation; ``first``: each run's
    first captured step (left out of the skew, as from every total); ``notes``: what reading the relation said."""
    if rows.is_empty():
        return ("<p>No collective: the trace's ranks ran no communication kernel (a single GPU's run has "
                "none).</p>")
    many = len(runs) > 1
    parts = []  # a run none of whose collectives carries a size: the sentence says so, in place of its note
    for run in runs:
        mine = rows.filter(pl.col("run_id") == run)
        head = f"<p><b>{html.escape(run)}</b></p>" if many else ""
        if mine.is_empty():
            parts.append(f"{head}<p>No collective: its ranks ran no communication kernel.</p>")
            continue
        inst = coll.instances(mine)
        parts.append(head + _bandwidth(inst, run) + _skew(mine, run, first.get(run)) + _positions(inst))
    unsized = rows.group_by("run_id").agg(pl.col("bytes").is_null().all()).filter(pl.col("bytes"))["run_id"]
    said = [n for n in notes if not ("carry no size" in n and any(n.startswith(f"note: {r}:") for r in unsized))]
    return "".join(parts) + "".join(f"<p class='note'>{html.escape(n)}</p>" for n in said)


def _bandwidth(inst: pl.DataFrame, run: str) -> str:
    """The bandwidth figure of one run's instances, or the sentence that says why there is none."""
    if inst["bytes"].is_null().all():
        return f"<p>{UNSIZED}</p>"
    measured = inst.filter(pl.col("busbw_gbps").is_not_null())
    if measured.is_empty():
        return ("<p>No collective's transfer is measured: the ranks' clocks disagree, or some rank lacks each "
                "instance (see the notes): sizes without a bus bandwidth.</p>")
    link = cast("str | None", measured["link"].drop_nulls().first())
    peak = cast("float | None", measured["link_peak_gbps"].max())
    against = (f"the dashed line is the peak of the GPUs' link ({link}, {peak:,.0f} GB/s one way)"
               if peak is not None else "the link of the GPUs is unknown: no peak is drawn")
    sources = ", ".join(sorted(measured["size_from"].drop_nulls().unique().to_list())) or "unknown"
    return (figure(figures.collective_bandwidth(measured, f"{run}: bus bandwidth of each collective, each step"))
            + "<p class='note'>Bus bandwidth as nccl-tests computes it: size / transfer time × a factor of the "
              "operation and its ranks (2(n−1)/n for an all-reduce), the transfer timed from the last rank's "
              f"arrival, so no rank's wait counts; {against}. Sizes from: {html.escape(sources)}.</p>")


def _skew(rows: pl.DataFrame, run: str, first: int | None) -> str:
    """The skew figure of one run's normal steps, or the sentence that says why there is none."""
    steps = coll.step_last(rows)
    if first is not None:
        steps = steps.filter(pl.col("step") != first)
    if steps.is_empty():
        return ("<p>No arrival skew per step: no normal step (the first captured left out) has collectives "
                "every rank ran.</p>")
    return (figure(figures.collective_skew(steps, f"{run}: arrival skew of each step and the rank that arrived "
                                                  "last"))
            + "<p class='note'>Arrival skew: the last rank's arrival at a collective less the first's, summed over "
              "the step's collectives; the bar's colour and label: the rank that held the others longest (as "
              "<code>traceql ranks</code> weighs a straggler) and how long. The first captured step is left out "
              "(each rank's capture began at its own moment).</p>")


def _positions(inst: pl.DataFrame) -> str:
    """The instances of a step across the steps: size, medians of transfer, bandwidth, share and skew, last rank."""
    def num(value: float | None, scale: float, digits: int) -> str:
        return "-" if value is None else f"{value / scale:,.{digits}f}"

    rows = [[x["collective"], x["instance"], "-" if x["bytes"] is None else size(x["bytes"]), x["steps"],
             num(x["transfer_ns"], 1e3, 1),
             num(x["busbw_gbps"], 1, 1), num(x["peak_share"], 0.01, 0), num(x["skew_ns"], 1e3, 1),
             "-" if x["last_rank"] is None else f"{x['last_rank']} ({x['last_count']} of {x['steps']})"]
            for x in coll.positions(inst).iter_rows(named=True)]
    header = ["collective", "#", "size", "steps", "transfer µs", "bus bandwidth GB/s", "% of peak", "skew µs",
              "last rank (steps)"]
    kept = [i for i, h in enumerate(header) if h == "#" or any(r[i] != "-" for r in rows)]  # no empty column
    rows, header = [[r[i] for i in kept] for r in rows], [header[i] for i in kept]
    return (table(rows, header, numeric=[h != "collective" for h in header], whole=["collective"])
            + "<p class='note'>Each instance of a step (#k: the k-th of its collective in the step) across the "
              "steps: medians over the steps; last rank: the one that arrived last most often.</p>")
