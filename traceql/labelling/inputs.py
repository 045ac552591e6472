"""What labelling reads, each input once: a trace's timeline, an isolated run's compute kernels, Nsight
Compute metrics. Reading writes nothing and judges nothing; what an input lacks becomes a note."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from traceql.analyzers.baselines.isolated import communicating, other_comm, outside_steps
from traceql.analyzers.breakdown import KIND_CODES, Batch, rank_breakdown_batches
from traceql.analyzers.partial import comm_devices, partial_notes
from traceql.analyzers.step_breakdown import STEP_KEY
from traceql.analyzers.untraced import Untraced, inflation_note, untraced
from traceql.errors import InputError
from traceql.model import schema
from traceql.model.names import with_keys, with_signature
from traceql.sources import inputs
from traceql.sources.buckets import run_folder
from traceql.sources.ncu import read_ncu
from traceql.sources.runfolder import injected_steps, read_manifest, run_name, step_times
from traceql.sources.shards import Shard
from traceql.trace import Trace, read_trace


@dataclass
class Timeline:
    """A trace's GPU timeline, read once: kernels (with ``signature`` and ``key``, their steps), memory
    operations, annotations."""

    path: Path
    kernels: pl.DataFrame
    memops: pl.DataFrame
    nvtx: pl.DataFrame
    ranks: pl.DataFrame
    has_metrics: bool  # the input held Nsight Compute metrics (which are not a timeline)
    notes: list[str] = field(default_factory=list)  # what reading it had to do differently
    steps: pl.DataFrame = field(default_factory=lambda: schema.empty(schema.RELATIONS["steps"]))  # step ranges
    # a window of a file's steps read alone (``traceql.sources.shards``): the communication kernels of its other
    # windows that ran beside its own, and (the first window) its ranks' time breakdown, of all their activity
    context: pl.DataFrame | None = None
    breakdown: pl.DataFrame | None = None
    waits: pl.DataFrame = field(default_factory=lambda: schema.empty(schema.RELATIONS["waits"]))  # recorded
    gpus: list[str | None] = field(default_factory=list)  # the name of each GPU its kernels ran on (None: unnamed)

    def signatures(self) -> pl.Series:
        return self.kernels.filter(pl.col("kind") == "compute")["signature"]

    def has_isolated_steps(self) -> bool:
        return bool((self.kernels["step_kind"] == "isolated").any())


@dataclass
class Baseline:
    """An isolated run, read once: its compute kernels (keyed, with steps) and what is wrong with it."""

    path: Path
    kernels: pl.DataFrame
    notes: list[str]

    @property
    def signatures(self) -> pl.Series:
        return self.kernels["signature"].unique()


ACTIVITY_BATCH = 1 << 20  # rows of a rank's activity in memory at once, for its breakdown


def _activity(trace: Trace, table: str) -> Iterator[tuple[str, int, Iterator[Batch]]]:
    """Each rank's activity in ``table`` (``run_id, rank, start_ns, end_ns, kind``), in start order, a batch at
    a time: what :func:`rank_breakdown_batches` reads."""
    codes = " ".join(f"WHEN '{kind}' THEN {code}" for kind, code in KIND_CODES.items())

    def batches(run_id: str, rank: int) -> Iterator[Batch]:
        query = f"""SELECT start_ns, end_ns, (CASE kind {codes} ELSE {len(KIND_CODES)} END)::UTINYINT AS kind
                    FROM {table} WHERE run_id = ? AND rank = ? ORDER BY start_ns"""
        for batch in trace.own_batches(query, [run_id, rank], ACTIVITY_BATCH):
            yield tuple(batch.column(c).to_numpy() for c in range(3))

    for run_id, rank in trace.own_sql(f"SELECT DISTINCT run_id, rank FROM {table}").iter_rows():
        yield run_id, rank, batches(run_id, rank)


def read_timeline(paths: str | Path | Sequence[str | Path] | None, *, shard: Shard | None = None) -> Timeline:
    """Read the timeline of a trace (files or folders; the embedded example when None), or of one ``shard``
    of a run (``traceql.sources.shards``)."""
    with read_trace(paths, shard=shard) as trace:
        breakdown = rank_breakdown_batches(_activity(trace, trace.activity)) if trace.activity else None
        timeline = Timeline(trace.paths[0], with_keys(trace.relation("kernels", compact=True)), trace.memcpy,
                            trace.nvtx, trace.ranks, not trace.relation("kernel_metrics").is_empty(),
                            list(trace.notes), trace.relation("steps"), trace.context, breakdown,
                            trace.relation("waits"), trace.relation("gpus")["name"].to_list())
    return _partial_checked(_isolated_checked(timeline), shard)


def _partial_checked(timeline: Timeline, shard: Shard | None) -> Timeline:
    """``timeline`` with a warning per run that is part of a larger job (``analyzers.partial``), where it is a
    whole run (a shard's run is judged over all its shards: ``labelling.by_rank``)."""
    if shard is None:
        timeline.notes += partial_notes(comm_devices(timeline.kernels), timeline.ranks)
    return timeline


def _isolated_checked(timeline: Timeline) -> Timeline:
    """``timeline`` with its isolated steps that reduced gradients left out of the steps (no reference), and a
    note per run that says so; a note too where they ran other communication (DDP's buffer broadcast), which
    leaves them a reference but for the kernels it overlapped."""
    bad = communicating(timeline.kernels)
    for run_id, n, names in other_comm(timeline.kernels).iter_rows():
        if run_id not in bad["run_id"]:
            timeline.notes.append(f"note: {run_id}: its isolated steps ran {n:,} {', '.join(names)} kernels (DDP "
                                  "broadcasts its buffers before each forward), no gradient communication: still "
                                  "the reference, less the kernels that ran beside them")
    if bad.is_empty():
        return timeline
    for run_id in bad["run_id"].unique(maintain_order=True):  # the same words from every shard of a run
        timeline.notes.append(f"note: {run_id}: its isolated steps reduced gradients (FSDP and tensor "
                              "parallelism cannot turn it off): not a reference, so left out of the steps (a "
                              "single-GPU twin given as --baseline is one)")
    on = bad.select(STEP_KEY).with_columns(pl.lit("isolated").alias("step_kind"))
    timeline.kernels = outside_steps(timeline.kernels, bad)
    timeline.memops = outside_steps(timeline.memops, bad)
    timeline.steps = timeline.steps.join(on, on=[*STEP_KEY, "step_kind"], how="anti", maintain_order="left")
    return timeline


def read_baseline(paths: str | Path | Sequence[str | Path]) -> Baseline:
    """Read an isolated run's compute kernels; a note when it holds communication (not isolated)."""
    with read_trace(paths) as iso:
        kernels = iso.relation("kernels", compact=True)
        path = iso.paths[0]
        notes = list(iso.notes)
        metrics = not iso.relation("kernel_metrics").is_empty()
    if metrics and kernels.is_empty():
        raise InputError("Nsight Compute metrics are not an isolated run: give its timeline (an nsys export or a "
                         "torch.profiler trace) as --baseline, the metrics as --metrics", path=str(path))
    if kernels.filter(pl.col("kind") == "compute").is_empty():
        raise InputError("the baseline holds no compute kernels (a run on CPU?): nothing to compare with",
                         path=str(path))
    comm = kernels.filter(pl.col("kind") == "comm").height
    notes += [f"warning: the baseline has {comm:,} communication kernel{'' if comm == 1 else 's'}: it is not an "
              "isolated run "
              "(record it on one GPU without DDP/NCCL)"] if comm else []
    return Baseline(path, with_keys(kernels.filter(pl.col("kind") == "compute")), notes)


def read_metrics(paths: Sequence[str | Path]) -> pl.DataFrame:
    """Nsight Compute launch metrics (with ``signature``) from ncu CSVs; InputError for anything else."""
    files = inputs.resolve(list(paths))
    for f in files:
        if f.fmt != "ncu-csv":
            raise InputError("not an Nsight Compute CSV (give ncu --csv --page raw|details output)", path=str(f.path))
    return with_signature(pl.concat([read_ncu(f.path).metrics for f in files], how="diagonal_relaxed"))


def run_untraced(paths: Sequence[Path] | None) -> tuple[str, Untraced] | None:
    """A run's name and its traced and untraced median steps (``analyzers.untraced``), from what its run
    folder's ranks recorded (``paths``: its inputs; None: the embedded example); None without them."""
    folder = run_folder(list(paths) if paths is not None else None)
    if folder is None:
        return None
    manifest = read_manifest(folder) or {}
    found = untraced(step_times(folder), injected_steps(manifest))
    return None if found is None else (run_name(folder, manifest), found)


def profiler_notes(runs: Sequence[Sequence[Path] | None]) -> list[str]:
    """A note for each of ``runs`` (their inputs; None: the embedded example) whose steps took longer traced than
    untraced by more than ``analyzers.untraced.INFLATION_SAID`` (:func:`run_untraced`)."""
    out = []
    for paths in runs:
        found = run_untraced(paths)
        note = inflation_note(*found) if found else None
        out += [note] if note else []
    return out
