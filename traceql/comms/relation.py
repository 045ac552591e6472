"""The ``collectives`` relation of an opened trace: its communication kernels sized from what each input
records (a torch.profiler trace's collective records, an nsys export's NCCL payloads, the run folder's DDP
buckets), matched into instances across ranks, measured against the link of the run's GPUs."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import polars as pl

from traceql.analyzers import collectives as coll
from traceql.analyzers.buckets import own_buckets
from traceql.analyzers.links import Link, link
from traceql.analyzers.partial import comm_devices, partial_notes, partial_runs
from traceql.analyzers.stragglers import arrivals, disagreeing
from traceql.analyzers.threaded import in_order
from traceql.model import schema
from traceql.model.detach import detached_fields
from traceql.sources import kineto_comms, nsys_comms
from traceql.sources.buckets import given_by, gradients_of, run_folder
from traceql.sources.runfolder import read_manifest
from traceql.sources.shards import Shard, at_once, large
from traceql.trace import Trace, read_trace

COMM_COLUMNS = ["run_id", "rank", "device", "stream", "start_ns", "end_ns", "short_name", "correlation_id",
                "kind", "collective", "launch_ns", "step", "step_kind"]


@dataclass
class Collectives:
    """The relation (one row per rank of each instance), and per run its link and where its sizes came from."""

    rows: pl.DataFrame
    links: dict[str, Link | None] = field(default_factory=dict)
    gpus: dict[str, str | None] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    gpu_ns: dict[str, int] = field(default_factory=dict)  # per run, every kernel's time summed over its ranks


def recorded_link(folder: Path) -> Link | None:
    """The NVLinks `traceql collect` found on the run's first GPU (its manifest's ``environment.interconnect``:
    ``nvidia-smi nvlink -s``), as a link; None where it recorded none."""
    manifest = read_manifest(folder) or {}
    found = (manifest.get("environment") or {}).get("interconnect") if isinstance(manifest, dict) else None
    if not isinstance(found, dict):
        return None
    links, each, total = (found.get(k) for k in ("nvlink_links", "nvlink_link_gbps", "nvlink_gbps"))
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in (links, each, total)):
        return None
    return Link(f"NVLink, {links} x {each:g} GB/s (nvidia-smi)", float(cast(float, total)))


@dataclass(frozen=True)
class Read:
    """What the relation is made of, of a run read whole or a shard at a time: its ranks, runs (a row a file) and
    GPUs, its communication kernels, every kernel's time summed per run (``ns``), what reading it noted."""

    ranks: pl.DataFrame
    runs: pl.DataFrame
    gpus: pl.DataFrame
    comm: pl.DataFrame
    busy: pl.DataFrame
    notes: list[str]


def read_of(trace: Trace) -> Read:
    """:class:`Read` of an opened trace."""
    kernels = trace.relation("kernels", compact=True)
    comm = kernels.filter(pl.col("kind") == "comm").select(COMM_COLUMNS).cast({"short_name": pl.String})
    busy = kernels.group_by("run_id").agg((pl.col("end_ns") - pl.col("start_ns")).sum().alias("ns"))
    return Read(trace.ranks, trace.runs, trace.gpus, comm, busy, list(trace.notes))


def read_shards(parts: Sequence[Shard]) -> Read:
    """:class:`Read` of a run a shard at a time (one shard's kernels in memory at once, or two small ones:
    ``shards.at_once``), as the run read whole gives it."""
    got = list(in_order(_read_shard, list(parts), None, at_once(parts), "traceql-shard"))

    def joined(name: str, frames: list[pl.DataFrame], key: list[str]) -> pl.DataFrame:
        return pl.concat(frames, how="vertical_relaxed").unique(key, keep="first", maintain_order=True).sort(
            schema.order(name), maintain_order=True)

    return Read(joined("ranks", [g.ranks for g in got], ["run_id", "rank"]),
                joined("runs", [g.runs for g in got], ["run_id", "path"]),
                joined("gpus", [g.gpus for g in got], ["run_id", "device"]),
                pl.concat([g.comm for g in got]).sort(schema.order("kernels"), maintain_order=True),
                pl.concat([g.busy for g in got]).group_by("run_id").agg(pl.col("ns").sum()),
                list(dict.fromkeys(n for g in got for n in g.notes)))


def _read_shard(shard: Shard, _common: None) -> Read:
    with read_trace(None, shard=shard) as trace:
        return detached_fields(read_of(trace))  # its parts, not its kernels' buffers


Sizes = tuple[pl.DataFrame, pl.DataFrame, dict[str, list[int]], dict[str, Link]]


def _sizes(trace: Read, given: dict[str, Any]) -> Sizes:
    """What every input of ``trace`` records of its collectives' sizes: by kernel, by call, DDP buckets by run;
    and the links its run folders recorded, by run."""
    ranks, runs = trace.ranks, trace.runs
    source = dict(zip(runs["path"], runs["source"], strict=True))
    by_kernel = [pl.DataFrame(schema=coll.BY_KERNEL)]
    by_call = [pl.DataFrame(schema=coll.BY_CALL)]
    folders: dict[str, Path | None] = {}
    world = ranks.group_by("run_id").len()
    world_of = dict(zip(world["run_id"], world["len"], strict=True))
    for path, mine in ranks.group_by("path", maintain_order=True):
        p = Path(str(path[0]))
        kind = source.get(str(p))
        if kind == "kineto":
            for run_id, rank in mine.select("run_id", "rank").iter_rows():
                k, c = kineto_comms.read(p, run_id, rank)
                by_kernel.append(k.select(*coll.BY_KERNEL))
                by_call.append(c.select(*coll.BY_CALL))
        elif kind == "nsys":
            pids = {pid: (run_id, rank) for run_id, rank, pid in mine.select("run_id", "rank", "pid").iter_rows()
                    if pid is not None}
            by_call.append(nsys_comms.read(p, pids, world_of[mine["run_id"][0]]).select(*coll.BY_CALL))
        for run_id in mine["run_id"].unique():
            folders[run_id] = folders.get(run_id) or run_folder([p])
    # each run's buckets and recorded link, read once from its run folder
    buckets = {}
    for run, folder in folders.items():
        known = gradients_of(folder, given)
        if sizes := own_buckets(known.recorded, known.param_bytes, known.cap_mb):
            buckets[run] = sizes
    recorded = {run: lk for run, folder in folders.items()
                if folder is not None and (lk := recorded_link(folder)) is not None}
    return pl.concat(by_kernel), pl.concat(by_call), buckets, recorded


def _gpus(trace: Read, comm: pl.DataFrame) -> dict[str, str | None]:
    """Each run's GPU, by name: the one most of its communication kernels ran on."""
    gpus = trace.gpus.select("run_id", "device", "name")
    used = comm.select("run_id", "device").join(gpus, on=["run_id", "device"], how="left")
    out: dict[str, str | None] = {}
    for run_id, names in used.group_by("run_id", maintain_order=True):
        counted = Counter(n for n in names["name"].to_list() if n)
        out[str(run_id[0])] = counted.most_common(1)[0][0] if counted else None
    return out


def collectives(trace: Trace | Read, gradients: Path | None = None) -> Collectives:
    """The ``collectives`` relation of ``trace`` (``analyzers.collectives``), with a note per run whose
    collectives carry no size (and why), or whose GPU's link is unknown. ``gradients``: a gradients file (the
    model's ``param_bytes`` and ``bucket_cap_mb``, as `whatif --gradients` reads it) whose DDP buckets size the
    all-reduces of a run that records none; ``trace`` opened, or :class:`Read` of it."""
    if isinstance(trace, Trace):
        trace = read_of(trace)
    comm = trace.comm
    given = given_by(gradients)
    by_kernel, by_call, buckets, recorded = _sizes(trace, given)
    gpus = _gpus(trace, comm)
    links = {run: recorded.get(run) or link(name) for run, name in gpus.items()}
    sized = coll.sized(comm, by_kernel, by_call, buckets)
    devices = comm_devices(comm)
    partial = partial_runs(devices, trace.ranks)["run_id"].to_list()
    unaligned = disagreeing(arrivals(comm, trace.ranks))
    rows = coll.collectives(sized, trace.ranks, links, partial, [run for run, _ in unaligned])
    notes = partial_notes(devices, trace.ranks) + [
        f"note: {run}: its ranks' clocks disagree (collectives end {skew / 1e6:.1f} ms apart): who arrived last "
        "and the skew are not measured, and each transfer is timed by its shortest kernel (bandwidth: a floor)"
        for run, skew in unaligned]
    for run_id in trace.runs["run_id"].unique(maintain_order=True).to_list():
        mine = rows.filter(pl.col("run_id") == run_id)
        if mine.is_empty():
            continue
        unsized = mine.filter(pl.col("bytes").is_null() & pl.col("last")).height
        if unsized:
            notes.append(f"note: {run_id}: {unsized:,} of {mine.filter(pl.col('last')).height:,} collectives "
                         "carry no size: the trace records none (torch.profiler records them; nsys exports "
                         "NCCL's with --include-blobs=true), nor a DDP bucket fits them (--gradients FILE gives "
                         "the model's: its param_bytes and bucket_cap_mb, as datasets/examples/gpt2/gradients.json "
                         "gives GPT-2's): no bandwidth for those")
            per_step = (mine.filter(pl.col("last") & (pl.col("op") == "AllReduce") & pl.col("step").is_not_null())
                        .group_by("step").len()["len"])
            if run_id in buckets and per_step.len() and (per_step != len(buckets[run_id])).any():
                most = int(cast(int, per_step.max()))
                notes.append(f"note: {run_id}: its {len(buckets[run_id])} DDP buckets do not match the "
                             f"{most} all-reduces of a step (another model or cap?): those steps "
                             "are left without sizes")
            if given and run_id not in buckets and "bucket_cap_mb" not in given:
                notes.append(f"note: {run_id}: --gradients gives the model's gradients but not the run's bucket cap, "
                             'and the run records none: add "bucket_cap_mb" to the gradients file')
        if links.get(run_id) is None:
            notes.append(f"note: {run_id}: the link of GPU {gpus.get(run_id) or '(unnamed)'} is unknown: "
                         "bandwidth without a share of its peak")
    busy = trace.busy
    return Collectives(rows, links, gpus, notes, dict(zip(busy["run_id"].to_list(), busy["ns"].to_list(),
                                                          strict=True)))


def read_runs(runs: Sequence[list[Path] | None], gradients: Path | None = None) -> Collectives:
    """The ``collectives`` relation of each run (its inputs; None: the embedded example), each read on its own
    (its sizes and link are the run's; a large run of several files a shard at a time: ``shards.large``), as
    one; the notes of reading them too."""
    found = []
    for run_paths in runs:
        parts = large(run_paths)
        if parts is not None:
            read = read_shards(parts)
        else:
            with read_trace(run_paths) as trace:
                read = read_of(trace)
        one = collectives(read, gradients)
        one.notes = [*read.notes, *one.notes]
        found.append(one)
    rows = pl.concat([f.rows for f in found]) if found else pl.DataFrame(schema=coll.COLLECTIVES)
    return Collectives(rows, {k: v for f in found for k, v in f.links.items()},
                       {k: v for f in found for k, v in f.gpus.items()}, [n for f in found for n in f.notes],
                       {k: v for f in found for k, v in f.gpu_ns.items()})
