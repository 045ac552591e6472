"""`traceql collectives`: every collective instance of a trace with its size, bus bandwidth and arrival skew."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from traceql.analyzers import collectives as coll
from traceql.comms.relation import read_runs
from traceql.labelling.request import request


@dataclass
class CollectivesResult:
    """``rows``: the ``collectives`` relation (one row per rank of each instance); ``instances``: one row per
    instance; ``positions``: each instance of a step across the steps; ``steps``: per step the rank that held
    the others longest; ``runs``: per run its GPU, link and peak, and where its sizes came from; ``totals``: per
    run and collective, its kernels' count, total, share of the GPU time and spread (``gpu_ns``: per run, every
    kernel's time summed over its ranks)."""

    rows: pl.DataFrame
    runs: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)
    gpu_ns: dict[str, int] = field(default_factory=dict)

    @property
    def totals(self) -> pl.DataFrame:
        return coll.totals(self.rows, self.gpu_ns)

    @property
    def instances(self) -> pl.DataFrame:
        return coll.instances(self.rows)

    @property
    def positions(self) -> pl.DataFrame:
        return coll.positions(self.instances)

    @property
    def steps(self) -> pl.DataFrame:
        return coll.step_last(self.rows)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: runs, totals, positions, steps and instances (each as a list of rows), notes."""
        return {"runs": self.runs, "totals": self.totals.to_dicts(), "positions": self.positions.to_dicts(),
                "steps": self.steps.to_dicts(), "instances": self.instances.to_dicts(), "notes": self.notes}


def collectives(paths: str | Path | Sequence[str | Path] | None = None, *,
                gradients: str | Path | None = None) -> CollectivesResult:
    """The collectives of each run of ``paths`` (the embedded example when None), each run read on its own:
    instances across ranks, sizes, algorithm and bus bandwidth, arrival skew (``traceql.analyzers.collectives``).
    ``gradients``: a gradients file (``{"param_bytes": [...], "bucket_cap_mb": 25}``) whose DDP buckets size the
    all-reduces of a run that records no size.

    Args:
        paths: the trace files or folders (none: the embedded example); runs given together are each read on
            their own.
        gradients: the model's gradient sizes, a JSON file (as ``whatif``'s ``gradients``; the cap may come
            from the run folder's manifest instead); None: none.

    Returns:
        The collectives relation of every run, per run its GPU, link, peak and where its sizes came from, and
        the notes reading called for.
    """
    req = request(paths)
    found = read_runs(req.runs(), Path(gradients) if gradients is not None else None)
    runs = []
    for run_id, gpu in found.gpus.items():
        lk = found.links.get(run_id)
        mine = found.rows.filter(pl.col("run_id") == run_id)
        runs.append({"run_id": run_id, "gpu": gpu, "link": lk.name if lk else None,
                     "link_peak_gbps": lk.peak_gbps if lk else None,
                     "ranks": mine["rank"].n_unique(), "instances": mine.filter(pl.col("last")).height,
                     "size_from": sorted(mine["size_from"].drop_nulls().unique().to_list())})
    return CollectivesResult(found.rows, runs, [*req.notes(), *found.notes], found.gpu_ns)
