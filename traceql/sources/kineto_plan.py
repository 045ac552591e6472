"""The plan of a torch.profiler run read one trace at a time: every trace's rank and the run's id, from each
trace's metadata alone (``distributedInfo``, read from the first bytes where it comes before the events).

Reading the traces of a run one by one with their plan gives each the rank and run id the whole run read at
once gives it (``kineto.load``), and the same warnings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from traceql.sources.files import InputFile, by_run
from traceql.sources.kineto_decode import decode, peek_meta
from traceql.sources.kineto_events import stream
from traceql.sources.kineto_file import KinetoFile, assign
from traceql.sources.kineto_helpers import Helpers


@dataclass(frozen=True)
class RunPlan:
    """Each trace's run id, rank and how its rank is known, and the warnings its rank gave; ``helpers``: where
    the run is read a trace at a time in this process, the helper processes that parse its traces ahead
    (``kineto_helpers``)."""

    ranks: dict[Path, tuple[str, int, str]]
    notes: dict[Path, list[str]] = field(default_factory=dict)
    helpers: Any = field(default=None, compare=False, repr=False)

    def place(self, path: Path) -> tuple[str, int]:
        """Where a trace's kernels come in the run read whole: its run id and rank."""
        return self.ranks[path][:2]


def _meta(path: Path) -> dict:
    """A trace's metadata: from its first bytes, else from the whole file."""
    peeked = peek_meta(path)
    return peeked if peeked is not None else (decode(path) or stream(path)).meta


def plan(files: list[InputFile], *, windows: bool = True, pool: Any = None) -> list[tuple[list[InputFile], RunPlan]]:
    """Each run of ``files`` (grouped as :func:`traceql.sources.kineto.load` groups them) and its plan (a trace
    is read whole: ``windows`` asks nothing of it; its metadata is read from its first bytes). Where ``pool``
    (a ``traceql.parallel.Pool``) runs its tasks in this process, helper processes start parsing the run's
    traces ahead, in the order its ranks are read, until the pool closes."""

    out = []
    empty = pl.DataFrame()
    for run, group in by_run(files).items():
        light = [KinetoFile(f.path, _meta(f.path), empty, empty, empty) for f in group]
        assigned, _ = assign(light, run)
        notes = {kf.path: [n for n in [kf.rank()[2]] if n] for kf in light}
        ranks = {kf.path: (run_id, rank, how) for kf, run_id, rank, how in assigned}
        helpers = None
        if pool is not None and pool.serial and len(group) > 1:
            cpu = {f.path: f.cpu_run for f in group}
            helpers = Helpers([(p, cpu[p]) for p in sorted(ranks, key=lambda p: ranks[p][:2])])
            pool.defer(helpers.close)
        out.append((group, RunPlan(ranks, notes, helpers)))
    return out
