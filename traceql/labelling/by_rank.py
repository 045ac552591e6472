"""A run labelled a rank at a time: only one rank's kernels are in memory at once, whatever the run's size, and
the ranks are read and labelled in parallel where asked (``traceql.parallel.Pool``).

Every figure that spans ranks is made in parts (``traceql.analyzers``): each shard of the run (a rank's
file, ``traceql.sources.shards``) gives its part, the parts are put together, and the next pass reads the
shards again with the whole run's figure. The passes:

1. **read**: the shard's kernels read, their overlap computed; its per-rank breakdown and step spans, and the
   parts of the run's figures: DDP's copy names, the clock's first timestamps, step bags (which ranks are
   replicas), step sequences (the canonical step). Its compute kernels go to the scratch folder.
2. **place**: each kernel's position in its replicas' canonical step; the narrow rows the position and key
   statistics are made from (every compute kernel's duration and overlap).
3. **features**: the detector's features from those statistics; the rows it judges, which it is fitted on.
4. **label**: scored by the fitted detector and labelled as the run's label source says; the rows are stored
   (parquet, a file a rank) and summed up (per rank, per step, by signature).

What the run gives equals what :func:`traceql.labelling.label.label` gives it read whole (a test holds them
equal on the shipped runs). The scratch folder (``TRACEQL_SCRATCH``, else the system's temporary folder) must
be one that every worker sees: on a cluster, a shared file system.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from traceql.analyzers.baselines.physical import ORDER, tick_samples, ticks
from traceql.analyzers.baselines.replicas import groups, step_bags
from traceql.analyzers.baselines.sequences import (
    PLACES,
    Canonical,
    Sequences,
    alignments,
    canonical_steps,
    gathered,
    sequence_places,
)
from traceql.analyzers.baselines.twins import INPUTS as TWIN_INPUTS
from traceql.analyzers.baselines.within_trace import (
    NARROW,
    StatParts,
    estimate_stats,
    stat_parts,
    with_estimates,
    with_replicas,
)
from traceql.analyzers.breakdown import rank_breakdown
from traceql.analyzers.cases import CASE_COLUMNS, rank_parts, rank_totals, signature_instances, top_of
from traceql.analyzers.compat import hta_view
from traceql.analyzers.detection.ddp import copy_edges, copy_names, edge_names, mark_copies
from traceql.analyzers.detection.features import COLUMNS, features_of
from traceql.analyzers.overlap import comm_overlap
from traceql.analyzers.reports import step_cases, step_spans, step_totals
from traceql.errors import InputError, TraceqlError
from traceql.labelling.inputs import Baseline, read_timeline
from traceql.labelling.label import FEATURE_INPUTS, _isolated, baseline_notes, decide, feature_inputs, scored
from traceql.labelling.result import DetectResult, StoredRows, _kinds, empty_result, summary_of
from traceql.labelling.sources import LabelSource, choose
from traceql.model import schema
from traceql.parallel import Pool, Progress
from traceql.sources.shards import Shard

SCRATCH_ENV = "TRACEQL_SCRATCH"


@dataclass(frozen=True)
class Settings:
    """How the run is labelled, and where its shards' working files go: sent once to every task."""

    baseline: Baseline | None
    threshold: float
    single_trace: bool
    hta_compat: bool
    folder: Path

    def path(self, i: int, what: str) -> Path:
        return self.folder / f"shard{i}.{what}"


@dataclass
class Read:
    """What reading one shard gives its run (pass 1)."""

    ranks: pl.DataFrame
    notes: list[str]
    compute: int = 0
    comm: bool = False
    metrics: bool = False
    isolated: bool = False  # whether any of its kernels is in an isolated step
    isolated_runs: list[str] = field(default_factory=list)  # the runs of its compute kernels in isolated steps
    breakdown: pl.DataFrame | None = None
    spans: pl.DataFrame | None = None
    copies: pl.DataFrame | None = None
    ticks: pl.DataFrame | None = None
    bags: tuple[pl.DataFrame, pl.DataFrame] | None = None
    edges: pl.DataFrame | None = None  # where its launches begin and end (a window of a rank's steps)
    reference: pl.DataFrame | None = None  # its isolated steps' kernels (a window: its rank's reference, in part)
    seen: pl.DataFrame | None = None  # the ranks of its kernels outside isolated steps
    runs: list[str] = field(default_factory=list)  # the runs of its compute kernels
    sequences: Sequences = field(default_factory=list)
    matched: int = 0  # compute kernels whose signature the baseline has


@dataclass(frozen=True)
class Run:
    """The run's figures made from every shard's parts, sent to the later passes."""

    settings: Settings
    copies: pl.DataFrame
    ticks: pl.DataFrame
    replicas: pl.DataFrame
    canonical: Canonical
    aligned: list[list[np.ndarray | None]]  # each shard's distinct sequences aligned with their canonical step
    windowed: bool = False  # whether any shard is a window of a rank's steps (then its parts are in launch order)
    stats: pl.DataFrame | None = None
    keys: pl.DataFrame | None = None
    reference: pl.DataFrame | None = None  # every rank's isolated steps' kernels, where windows split them
    detector: Any = None
    source: LabelSource = LabelSource.DETECTOR
    inrun_runs: pl.Series | None = None


@dataclass
class Labelled:
    """What labelling one shard gives its run (pass 4): its rows are stored, these are their sums."""

    cases: pl.DataFrame
    steps: pl.DataFrame
    case_rows: pl.DataFrame
    instances: pl.DataFrame
    kernels: int
    baseline_kinds: dict[str, int]
    reference_kinds: dict[str, dict[str, int]]


def read(item: tuple[int, Shard], settings: Settings) -> Read:
    """Pass 1: one shard read; its compute kernels, with their overlap, stored in the scratch folder."""
    i, shard = item
    tl = read_timeline(None, shard=shard)
    kernels = tl.kernels
    out = Read(tl.ranks.select("run_id", "rank"), list(tl.notes), metrics=not tl.ranks.is_empty() and tl.has_metrics)
    out.isolated = bool((kernels["step_kind"] == "isolated").any())
    out.comm = bool((kernels["kind"] == "comm").any())
    overlap = comm_overlap(kernels, tl.context)
    out.isolated_runs = overlap.filter(_isolated(overlap))["run_id"].unique().to_list()
    out.compute, out.runs = overlap.height, overlap["run_id"].unique(maintain_order=True).to_list()
    if not out.compute:
        return out
    isolated = _isolated(overlap)
    inputs = overlap.filter(~isolated)
    if not shard.windowed:
        out.breakdown = rank_breakdown(*(hta_view(kernels, tl.memops, tl.nvtx) if settings.hta_compat
                                         else (kernels, tl.memops)))
    else:  # the first window of a rank has its breakdown, of all its activity
        out.breakdown = tl.breakdown
    out.spans = step_spans(kernels, tl.memops)
    out.copies, out.edges, out.ticks = copy_names(kernels), copy_edges(kernels), tick_samples(kernels)
    out.bags = step_bags(inputs)
    if shard.windowed and out.isolated:
        out.reference = overlap.filter(isolated).select(TWIN_INPUTS[1:])
    out.sequences, places = sequence_places(inputs)
    out.seen = inputs.select("run_id", "rank").unique(maintain_order=True)
    if settings.baseline is not None:
        out.matched = int(overlap["signature"].is_in(settings.baseline.signatures.implode()).sum())
    at = isolated.not_().arg_true()  # the places of the kernels outside isolated steps, where they are
    nulls = pl.repeat(None, overlap.height, dtype=pl.Int32, eager=True)
    overlap.with_columns(nulls.alias(c).scatter(at, places[c]) for c in PLACES).write_ipc(
        settings.path(i, "kernels.arrow"))
    return out


def _prepared(overlap: pl.DataFrame, extra: pl.DataFrame) -> pl.DataFrame:
    """A shard's stored compute kernels as the labels need them (``labelling.label.prepared``): with
    ``ddp_copy``, a row id ``_row`` and ``tick_ns``."""
    return overlap.with_columns(extra["ddp_copy"]).with_row_index("_row").with_columns(extra["tick_ns"])


def place(item: tuple[int, Shard], run: Run) -> int:
    """Pass 2: the kernels prepared as the labels need them (``ddp_copy``, ``_row``, ``tick_ns``) and each placed
    in its replicas' canonical step; the parts of the statistics stored."""
    i, _ = item
    overlap = pl.read_ipc(run.settings.path(i, "kernels.arrow"))
    extra = pl.DataFrame([mark_copies(overlap, run.copies)]).with_columns(
        overlap.select("run_id").join(run.ticks, on="run_id", how="left", maintain_order="left")["tick_ns"])
    extra.write_ipc(run.settings.path(i, "extra.arrow"))  # what the labels add to the kernels stored: small
    prepared = _prepared(overlap, extra)
    outside = prepared.filter(~_isolated(prepared))
    rows = with_replicas(feature_inputs(prepared), run.replicas).with_columns(
        gathered(outside.select(*PLACES), run.aligned[i]))
    rows.write_ipc(run.settings.path(i, "placed.arrow"))
    parts = stat_parts(rows.select(NARROW))
    for name in ("clean", "mins", "dirty"):
        getattr(parts, name).write_ipc(run.settings.path(i, f"{name}.arrow"))
    return rows.height


def _features(i: int, run: Run) -> pl.DataFrame:
    rows = pl.read_ipc(run.settings.path(i, "placed.arrow"))
    return features_of(with_estimates(rows, run.stats, run.keys))


def features(item: tuple[int, Shard], run: Run) -> int:
    """Pass 3: the detector's features (stored); the rows it judges (what it is fitted on) stored, in row order."""
    i, _ = item
    table = _features(i, run)
    stored = [c for c in FEATURE_INPUTS[1:] if c not in COLUMNS]  # the kernels hold those
    table.drop(stored).write_ipc(run.settings.path(i, "features.arrow"))
    run.settings.path(i, "placed.arrow").unlink()
    judged = _ordered(i, run, table).filter(pl.Series(_candidates(table.select(COLUMNS).to_numpy())))
    judged.write_ipc(run.settings.path(i, "judged.arrow"))
    return judged.height


def _ordered(i: int, run: Run, table: pl.DataFrame) -> pl.DataFrame:
    """The detector's columns of ``table`` (rows of shard ``i``, with ``_row``); of a window of a rank's steps,
    with the columns of the run's kernel order too (windows hold launches, not the order they are read in)."""
    if not run.windowed:
        return table.select(COLUMNS)
    order = pl.read_ipc(run.settings.path(i, "kernels.arrow"), columns=ORDER)
    return order[table["_row"]].hstack(table.select(COLUMNS))


def _matrix(frames: list[pl.DataFrame], windowed: bool) -> np.ndarray:
    """Rows of several shards as the detector takes them, in the run's kernel order."""
    if not frames:
        return np.empty((0, len(COLUMNS)))
    rows = pl.concat(frames, how="vertical_relaxed")
    if windowed:
        rows = rows.sort(ORDER, nulls_last=True, maintain_order=True)
    return rows.select(COLUMNS).to_numpy()


def _candidates(x: np.ndarray) -> np.ndarray:
    from traceql.analyzers.detection.detector import SlowdownDetector

    return SlowdownDetector()._candidates(x)  # noqa: SLF001 - the one definition of the rows it judges


def label(item: tuple[int, Shard], run: Run) -> Labelled:
    """Pass 4: scored and labelled; the rows stored (parquet) and summed up."""
    i, _ = item
    overlap = _prepared(*(pl.read_ipc(run.settings.path(i, f"{name}.arrow")) for name in ("kernels", "extra")))
    added = pl.read_ipc(run.settings.path(i, "features.arrow"))
    table = overlap.select("_row", *(c for c in FEATURE_INPUTS if c not in added.columns)).join(
        added, on="_row", maintain_order="left")
    rows, _ = decide(scored(overlap, table, run.detector), run.source, baseline=run.settings.baseline,
                     model=run.detector, threshold=run.settings.threshold, inrun_runs=run.inrun_runs,
                     inrun_reference=run.reference)
    rows = rows.select(*schema.CASES)
    rows.write_parquet(run.settings.path(i, "labels.parquet"), compression="lz4")
    for name in ("kernels", "extra", "features"):
        run.settings.path(i, f"{name}.arrow").unlink()
    baseline, reference = _kinds(rows)
    return Labelled(rank_parts(rows), step_cases(rows), rows.filter(pl.col("is_slowdown")).select(CASE_COLUMNS),
                    signature_instances(rows), rows.height, baseline, reference)


def scratch() -> tempfile.TemporaryDirectory:
    """A scratch folder for one run's working files (``$TRACEQL_SCRATCH``, else the temporary folder)."""
    where = os.environ.get(SCRATCH_ENV) or None
    if where is not None and not Path(where).is_dir():
        raise InputError(f"${SCRATCH_ENV} is not a folder (the scratch folder every worker sees)", path=where)
    return tempfile.TemporaryDirectory(prefix="traceql-ranks-", dir=where)


class _Passes:
    """The passes of one run over its shards, on a pool; a failed shard stops the run with its error."""

    def __init__(self, shards: list[Shard], pool: Pool, progress: Progress | None) -> None:
        self.items = list(enumerate(shards))
        self.pool, self.progress = pool, progress
        self.total = 4 * len(shards)
        self.done = 0

    def run(self, fn: Callable[[tuple[int, Shard], Any], Any], common: Any) -> list[Any]:
        out = []

        def tick(_done: int, _total: int | None, name: str) -> None:
            self.done += 1
            if self.progress:
                self.progress(self.done, self.total, name)

        for _, result in self.pool.map(fn, self.items, common=common, name=lambda it: it[1].name, progress=tick,
                                       cost=lambda it: it[1].size()):
            if isinstance(result, TraceqlError):
                raise result
            out.append(result)
        return out


def _parts(settings: Settings, i: int) -> StatParts:
    """A shard's parts of the statistics, read (and their files removed)."""
    paths = [settings.path(i, f"{name}.arrow") for name in ("clean", "mins", "dirty")]
    parts = StatParts(*(pl.read_ipc(p) for p in paths))
    for p in paths:
        p.unlink()
    return parts


def _frame(parts: Sequence[pl.DataFrame | None]) -> pl.DataFrame:
    given = [p for p in parts if p is not None]
    return pl.concat(given, how="diagonal_relaxed") if given else pl.DataFrame()


def _fit(run: Run, counts: list[int], detector: Any, inputs: Callable[[], np.ndarray]) -> Any:
    """The detector fitted on every judged row of the run, in the run's order (the rows of all its kernels where
    too few are judged, as the whole run read at once does)."""
    from traceql.analyzers.detection.detector import MIN_FIT

    paths = [run.settings.path(i, "judged.arrow") for i in range(len(counts))]
    judged = _matrix([pl.read_ipc(p) for p in paths], run.windowed)
    for p in paths:
        p.unlink()
    detector.fit(judged if len(judged) >= MIN_FIT else inputs())
    return detector


def label_by_rank(shards: list[Shard], settings: Settings, *, pool: Pool, top: int = 10, detector: Any = None,
                  progress: Progress | None = None) -> DetectResult:
    """One run's shards labelled a rank at a time (the passes above), on ``pool``; the result holds its rows
    on disk (:class:`StoredRows`), in a folder that lives as long as the result."""
    passes = _Passes(shards, pool, progress)
    firsts: list[Read] = passes.run(read, settings)
    notes = [n for r in firsts for n in r.notes]
    if not any(r.compute for r in firsts):
        if any(r.metrics for r in firsts):
            raise InputError("Nsight Compute metrics are not a timeline: give them as detect TRACE --metrics PATH",
                             path=shards[0].name)
        return empty_result(_frame([r.ranks for r in firsts]), "no GPU kernels in this trace (a run on CPU?): "
                            "nothing to label")
    if not any(r.comm for r in firsts):
        notes.append("no communication kernels in this trace: nothing overlaps, so no slowdown cases")
    seen = _frame([r.seen for r in firsts])
    bags = [r.bags for r in firsts if r.bags is not None]
    replicas = groups(seen, _frame([b[0] for b in bags]), _frame([b[1] for b in bags])) if seen.height else \
        seen.with_columns(pl.lit(None, pl.Int32).alias("replica"))
    canonical = canonical_steps([s for r in firsts for s in r.sequences], replicas)
    copies = pl.concat([_frame([r.copies for r in firsts]), edge_names(_frame([r.edges for r in firsts]))],
                       how="vertical_relaxed").unique(maintain_order=True)
    windowed = any(s.windowed for s in shards)
    run = Run(settings, copies, ticks(_frame([r.ticks for r in firsts])), replicas, canonical,
              [alignments(r.sequences, replicas, canonical) for r in firsts], windowed,
              reference=_frame([r.reference for r in firsts]) if windowed else None)
    passes.run(place, run)
    stats, keys = estimate_stats([_parts(settings, i) for i in range(len(shards))])
    run = Run(**{**run.__dict__, "stats": stats, "keys": keys})
    counts = passes.run(features, run)
    if detector is None:
        from traceql.analyzers.detection.detector import SlowdownDetector

        detector = SlowdownDetector(threshold=settings.threshold)

    def every_row() -> np.ndarray:  # too few judged rows: fitted on all, as the whole run would be
        return _matrix([_ordered(i, run, pl.read_ipc(settings.path(i, "features.arrow")))
                        for i in range(len(shards))], run.windowed)

    isolated = sorted({r for f in firsts for r in f.isolated_runs})
    source = choose(has_baseline=settings.baseline is not None, has_isolated_steps=any(f.isolated for f in firsts),
                    single_trace=settings.single_trace)
    run = Run(**{**run.__dict__, "detector": _fit(run, counts, detector, every_row), "source": source,
                 "inrun_runs": pl.Series("run_id", isolated, dtype=pl.String)})
    labelled: list[Labelled] = passes.run(label, run)
    rate = None
    if settings.baseline is not None:
        compute = sum(r.compute for r in firsts)
        rate = sum(r.matched for r in firsts) / compute if compute else 0.0
        notes += baseline_notes(rate, settings.baseline)
    return _result(shards, settings, firsts, labelled, source, rate, notes, top)


def _result(shards: list[Shard], settings: Settings, firsts: list[Read], labelled: list[Labelled],
            source: LabelSource, rate: float | None, notes: list[str], top: int) -> DetectResult:
    steps = schema.conform(step_totals(_frame([r.spans for r in firsts]), _frame([r.steps for r in labelled])),
                           schema.STEP_COST)
    tops = schema.conform(top_of(_frame([r.case_rows for r in labelled]), _frame([r.instances for r in labelled]),
                                 top), schema.TOP_SIGNATURES)
    cases = rank_totals(_frame([r.cases for r in labelled]))  # a rank's windows add up
    ranks = summary_of(_frame([r.breakdown for r in firsts]), cases, steps)
    holder = tempfile.TemporaryDirectory(prefix="traceql-rows-", dir=settings.folder.parent)
    files = []
    for i in range(len(shards)):
        files.append(Path(holder.name) / f"rank{i}.parquet")
        shutil.move(settings.path(i, "labels.parquet"), files[-1])
    baseline: dict[str, int] = {}
    reference: dict[str, dict[str, int]] = {}
    for r in labelled:
        for k, n in r.baseline_kinds.items():
            baseline[k] = baseline.get(k, 0) + n
        for k, c in r.reference_kinds.items():
            mine = reference.setdefault(k, {"kernels": 0, "cases": 0})
            mine["kernels"] += c["kernels"]
            mine["cases"] += c["cases"]
    stored = StoredRows(tuple(files), sum(r.kernels for r in labelled), sum(r.case_rows.height for r in labelled),
                        dict(sorted(baseline.items())), dict(sorted(reference.items())), holder=holder)
    mode = source.mode
    isolated = {run_id for f in firsts for run_id in f.isolated_runs}
    if source is LabelSource.INRUN and not {run_id for f in firsts for run_id in f.runs} <= isolated:
        mode = LabelSource.MIXED.mode  # a run without isolated steps came with others: the detector labels it
    return DetectResult(ranks=ranks, top_signatures=tops, rows=stored, mode=mode, match_rate=rate,
                        notes=list(dict.fromkeys(notes)), steps=steps)

