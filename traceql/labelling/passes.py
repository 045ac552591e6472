"""The five passes of a run labelled a rank at a time (:mod:`traceql.labelling.by_rank`), each a task over one
shard: what it reads, what it stores in the run's scratch folder, and what it gives back to be put together.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.ipc as ipc

from traceql.analyzers.baselines.isolated import clean_reference
from traceql.analyzers.baselines.physical import ORDER, tick_samples
from traceql.analyzers.baselines.replicas import step_bags
from traceql.analyzers.baselines.sequences import PLACES, Canonical, Sequences, gathered, sequence_places
from traceql.analyzers.baselines.twins import INPUTS as TWIN_INPUTS
from traceql.analyzers.baselines.within_trace import (
    GROUPS,
    NARROW,
    StatParts,
    estimate_stats,
    in_buckets,
    stat_parts,
    with_estimates,
    with_replicas,
)
from traceql.analyzers.breakdown import rank_breakdown
from traceql.analyzers.cases import CASE_COLUMNS, rank_parts, signature_instances
from traceql.analyzers.collectives import operations
from traceql.analyzers.compat import hta_view
from traceql.analyzers.detection.ddp import copy_parts, mark_copies
from traceql.analyzers.detection.features import COLUMNS, features_of
from traceql.analyzers.detection.features import INPUTS as FEATURE_INPUTS
from traceql.analyzers.overlap import comm_overlap
from traceql.analyzers.partial import comm_devices
from traceql.analyzers.replay.activities import activities
from traceql.analyzers.replay.stored import Stored
from traceql.analyzers.reports import step_cases, step_spans
from traceql.analyzers.step_breakdown import STEP_KEY, step_breakdown
from traceql.labelling.core import decide, feature_inputs, isolated, scored
from traceql.labelling.inputs import Baseline, read_timeline
from traceql.labelling.late import late_waits
from traceql.labelling.modes import LabelSource, divided
from traceql.labelling.result import kind_counts
from traceql.model import schema
from traceql.model.detach import detached_fields
from traceql.sources.shards import Shard

# what the later passes load (the detector: scikit-learn), loaded by each worker while it reads (traceql.parallel)
WARM = ("traceql.analyzers.detection.detector",)


@dataclass(frozen=True)
class Settings:
    """How the run is labelled, and where its shards' working files go: sent once to every task."""

    baseline: Baseline | None
    threshold: float
    single_trace: bool
    hta_compat: bool
    folder: Path
    replay: bool = False  # whether its activities are kept for a replay (what its causes cost)

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
    reference: bool = False  # whether it stored its isolated steps' kernels (a window: its rank's reference, in part)
    seen: pl.DataFrame | None = None  # the ranks of its kernels outside isolated steps
    runs: list[str] = field(default_factory=list)  # the runs of its compute kernels
    sequences: Sequences = field(default_factory=list)
    matched: int = 0  # compute kernels whose signature the baseline has
    activities: int | None = None  # the GPU activities it stored for the replay (None: none asked)
    index: Any = None  # where each of their buckets begins (``replay.Stored``)
    waits: pl.DataFrame | None = None  # its recorded stream waits
    late: pl.DataFrame | None = None  # the launches its GPUs waited for, by CPU section (``labelling.late``)
    breakdown_steps: pl.DataFrame | None = None  # its steps' breakdown (``step_breakdown``), for the causes' times
    gpus: list[str | None] = field(default_factory=list)  # the names of the GPUs its kernels ran on
    collectives: set[str] = field(default_factory=set)  # its collectives' operations (``collectives.operations``)
    comm_devices: pl.DataFrame | None = None  # the GPUs that ran its communication (analyzers.partial)


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
    buckets: int = 1  # the groups of the statistics, hashed into this many buckets (one task each)
    offsets: list[dict[str, list[int]]] | None = None  # where each bucket starts in each shard's stored parts
    stats: pl.DataFrame | None = None
    keys: pl.DataFrame | None = None
    factors: pl.DataFrame | None = None  # the estimates' learned factors (baselines.learned.chosen)
    reference: tuple[int, ...] | None = None  # the shards that stored isolated steps' kernels (windows: by rank)
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
    out = Read(tl.ranks.select("run_id", "rank"), list(tl.notes), metrics=not tl.ranks.is_empty() and tl.has_metrics,
               gpus=tl.gpus, collectives=operations(kernels))
    out.isolated = bool((kernels["step_kind"] == "isolated").any())
    out.comm = bool((kernels["kind"] == "comm").any())
    out.comm_devices = comm_devices(kernels)
    overlap = comm_overlap(kernels, tl.context)
    out.isolated_runs = overlap.filter(isolated(overlap))["run_id"].unique().to_list()
    out.compute, out.runs = overlap.height, overlap["run_id"].unique(maintain_order=True).to_list()
    if not out.compute:
        return out
    if settings.replay:  # what its replay reads, a window of steps at a time (``replay.windowed``)
        replayed = activities(kernels, tl.memops, tl.ranks)  # a window of steps is a slice of it
        out.index = Stored.write(replayed, settings.path(i, "activities.arrow"))
        out.activities, out.waits = replayed.height, tl.waits
        out.late = late_waits(replayed, tl.nvtx)
        mine = kernels.select(STEP_KEY).unique()  # a window's steps only: the others are its other windows'
        out.breakdown_steps = step_breakdown(kernels, tl.memops, tl.steps).join(mine, on=STEP_KEY, how="semi")
    own = isolated(overlap)
    inputs = overlap.filter(~own)
    if not shard.windowed:
        out.breakdown = rank_breakdown(*(hta_view(kernels, tl.memops, tl.nvtx) if settings.hta_compat
                                         else (kernels, tl.memops)))
    else:  # the first window of a rank has its breakdown, of all its activity
        out.breakdown = tl.breakdown
    out.spans = step_spans(kernels, tl.memops)
    (out.copies, out.edges), out.ticks = copy_parts(kernels), tick_samples(kernels)
    out.bags = step_bags(inputs)
    if shard.windowed and out.isolated:
        overlap.filter(clean_reference()).select(TWIN_INPUTS[1:]).write_ipc(settings.path(i, "reference.arrow"))
        out.reference = True
    out.sequences, places = sequence_places(inputs)
    out.seen = inputs.select("run_id", "rank").unique(maintain_order=True)
    if settings.baseline is not None:
        out.matched = int(overlap["signature"].is_in(settings.baseline.signatures.implode()).sum())
    at = own.not_().arg_true()  # the places of the kernels outside isolated steps, where they are
    nulls = pl.repeat(None, overlap.height, dtype=pl.Int32, eager=True)
    overlap.with_columns(nulls.alias(c).scatter(at, places[c]) for c in PLACES).write_ipc(
        settings.path(i, "kernels.arrow"))
    return detached_fields(out)


def _prepared(overlap: pl.DataFrame, extra: pl.DataFrame) -> pl.DataFrame:
    """A shard's stored compute kernels as the labels need them (``labelling.core.prepared``): with
    ``ddp_copy``, a row id ``_row`` and ``tick_ns``."""
    return overlap.with_columns(extra["ddp_copy"]).with_row_index("_row").with_columns(extra["tick_ns"])


def place(item: tuple[int, Shard], run: Run) -> dict[str, list[int]]:
    """Pass 2: the kernels prepared as the labels need them (``ddp_copy``, ``_row``, ``tick_ns``) and each placed
    in its replicas' canonical step; the parts of the statistics stored by bucket (where each bucket starts
    in them given back)."""
    i, _ = item
    overlap = pl.read_ipc(run.settings.path(i, "kernels.arrow"))
    extra = pl.DataFrame([mark_copies(overlap, run.copies)]).with_columns(
        overlap.select("run_id").join(run.ticks, on="run_id", how="left", maintain_order="left")["tick_ns"])
    extra.write_ipc(run.settings.path(i, "extra.arrow"))  # what the labels add to the kernels stored: small
    prepared = _prepared(overlap, extra)
    outside = prepared.filter(~isolated(prepared))
    rows = with_replicas(feature_inputs(prepared), run.replicas).with_columns(
        gathered(outside.select(*PLACES), run.aligned[i]))
    rows.write_ipc(run.settings.path(i, "placed.arrow"))
    parts, offsets = in_buckets(stat_parts(rows.select(NARROW)), run.buckets)
    for name in GROUPS:
        getattr(parts, name).write_ipc(run.settings.path(i, f"{name}.arrow"))
    return offsets


def statistics(item: tuple[int, Any], run: Run) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Pass 3: the position and key statistics of the groups of one bucket, from every shard's rows of it."""
    b, _ = item
    offsets = run.offsets
    assert offsets is not None

    def rows(i: int, name: str) -> pl.DataFrame:
        start, end = offsets[i][name][b:b + 2]
        return _mapped_slice(run.settings.path(i, f"{name}.arrow"), start, end - start)

    return estimate_stats([StatParts(**{name: rows(i, name) for name in GROUPS}) for i in range(len(offsets))])


def _mapped_slice(path: Path, start: int, length: int) -> pl.DataFrame:
    """Rows ``start`` .. ``start + length`` of an uncompressed Arrow IPC file, memory-mapped: only their pages are
    read (a polars scan of a slice read the whole file: about 1 ms a file and bucket, 4,096 of them at 32 ranks;
    the pass took 3.6 s, now 2.2). The map lasts as long as the frame does."""
    with pa.memory_map(str(path)) as source:
        table = ipc.open_file(source).read_all().slice(start, length)
    got = pl.from_arrow(table)
    assert isinstance(got, pl.DataFrame)  # a table, not an array
    return got


def _features(i: int, run: Run) -> pl.DataFrame:
    assert run.stats is not None and run.keys is not None  # pass 3 made them
    rows = pl.read_ipc(run.settings.path(i, "placed.arrow"))
    return features_of(with_estimates(rows, run.stats, run.keys), run.factors)


def features(item: tuple[int, Shard], run: Run) -> tuple[int, bool]:
    """Pass 4: the detector's features (stored); the rows it judges (what it is fitted on) stored, in row order;
    how many, and whether the run's factors divided any estimate of the shard."""
    i, _ = item
    table = _features(i, run)
    used = divided(table, run.factors) if run.factors is not None else False
    stored = [c for c in FEATURE_INPUTS[1:] if c not in COLUMNS]  # the kernels hold those
    table.drop(stored).write_ipc(run.settings.path(i, "features.arrow"))
    judged = ordered_rows(i, run, table).filter(pl.Series(_candidates(table.select(COLUMNS).to_numpy())))
    judged.write_ipc(run.settings.path(i, "judged.arrow"))
    return judged.height, used


def ordered_rows(i: int, run: Run, table: pl.DataFrame) -> pl.DataFrame:
    """The detector's columns of ``table`` (rows of shard ``i``, with ``_row``); of a window of a rank's steps,
    with the columns of the run's kernel order too (windows hold launches, not the order they are read in)."""
    if not run.windowed:
        return table.select(COLUMNS)
    order = pl.read_ipc(run.settings.path(i, "kernels.arrow"), columns=ORDER)
    return order[table["_row"]].hstack(table.select(COLUMNS))


def _candidates(x: np.ndarray) -> np.ndarray:
    from traceql.analyzers.detection.detector import candidates  # scikit-learn: loaded by the workers ahead (WARM)

    return candidates(x)


def _reference(run: Run, kernels: pl.DataFrame) -> pl.DataFrame | None:
    """Where windows split a rank's steps: the isolated steps' kernels of the ranks of ``kernels``, from every
    shard that stored some (each window reads its own ranks' alone)."""
    if run.reference is None:
        return None
    ranks = kernels.select("run_id", "rank").unique()
    parts = [pl.read_ipc(run.settings.path(j, "reference.arrow")).join(ranks, on=["run_id", "rank"], how="semi",
                                                                      maintain_order="left")
             for j in run.reference]
    return pl.concat(parts, how="vertical_relaxed") if parts else pl.DataFrame()


def label(item: tuple[int, Shard], run: Run) -> Labelled:
    """Pass 5: scored and labelled; the rows stored (parquet) and summed up."""
    i, _ = item
    overlap = _prepared(*(pl.read_ipc(run.settings.path(i, f"{name}.arrow")) for name in ("kernels", "extra")))
    added = pl.read_ipc(run.settings.path(i, "features.arrow"))
    table = overlap.select("_row", *(c for c in FEATURE_INPUTS if c not in added.columns)).join(
        added, on="_row", maintain_order="left")
    rows, _ = decide(scored(overlap, table, run.detector), run.source, baseline=run.settings.baseline,
                     model=run.detector, threshold=run.settings.threshold, inrun_runs=run.inrun_runs,
                     inrun_reference=_reference(run, overlap))
    rows = rows.select(*schema.CASES)
    rows.write_parquet(run.settings.path(i, "labels.parquet"), compression="lz4")
    baseline, reference = kind_counts(rows)
    return detached_fields(Labelled(rank_parts(rows), step_cases(rows),
                                    rows.filter(pl.col("is_slowdown")).select(CASE_COLUMNS),
                                    signature_instances(rows), rows.height, baseline, reference))
