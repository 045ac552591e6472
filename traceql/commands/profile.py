"""`traceql profile memory|compute|buckets|merge`: profile files of a model for `traceql solve`.

Memory and compute are measured by running the model (``traceql.collectors.profile_model``); buckets are read from
runs `traceql collect` made (their traces and the DDP buckets their ranks recorded); merge gathers the
folders several nodes wrote. The format is ``traceql.collectors.profile_format``'s. Memory and compute need only
torch (what a GPU node may be limited to): the trace analysis loads for ``buckets`` alone.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from traceql.collectors import manifest
from traceql.collectors.files import atomic_path, write_json
from traceql.collectors.profile_format import FORMAT, file_name, profile, validate
from traceql.collectors.profiling import run_profile
from traceql.errors import InputError, OptionError

if TYPE_CHECKING:
    import polars as pl

__all__ = ["buckets", "compute", "memory", "merge"]

Progress = Callable[[str], None]


def memory(input_dir: str | Path, out: str | Path, *, memory_limit: int | None = None, max_batch: int = 1024,
           progress: Progress | None = None) -> Path:
    """The largest local batch that fits, and the virtual workers that fit at each batch tried; the profile
    file written into ``out``. ``memory_limit`` (bytes) bounds the search (needed on CPU)."""
    if max_batch < 1 or (memory_limit is not None and memory_limit < 1):
        raise OptionError("--max-batch and --memory-limit must be positive")
    args = ["--max-batch", str(max_batch)] + (["--memory-limit", str(memory_limit)] if memory_limit else [])
    return run_profile("memory", input_dir, Path(out), args, progress)


def _fitting_batches(out: Path) -> list[int] | None:
    """The batches a memory profile in ``out`` found fitting (powers of two, and the largest), if any."""
    for path in sorted(out.glob("memory-*.json")):
        data = validate(json.loads(path.read_text()), str(path))
        fit = [r["batch"] for r in data["batches"] if r["fits"]]
        if fit:
            return sorted({b for b in fit if b & (b - 1) == 0} | {max(fit)})
    return None


def compute(input_dir: str | Path, out: str | Path, *, batches: list[int] | None = None, warmup: int = 3,
            iterations: int = 10, progress: Progress | None = None) -> Path:
    """Forward, backward and optimizer time per local batch (``batches``; default: those the memory profile in
    ``out`` found fitting, else 1 to 32 by powers of two); the profile file written into ``out``."""
    if batches is not None and (not batches or min(batches) < 1):
        raise OptionError("--batches must be positive batch sizes, e.g. 1,2,4,8")
    if iterations < 1 or warmup < 0:
        raise OptionError("--iterations must be 1 or more, --warmup 0 or more")
    chosen = batches or _fitting_batches(Path(out)) or [1, 2, 4, 8, 16, 32]
    args = ["--batches", ",".join(map(str, chosen)), "--warmup", str(warmup), "--iterations", str(iterations)]
    return run_profile("compute", input_dir, Path(out), args, progress)


def _median_ms(values: pl.Series) -> float | None:
    value = values.median()
    return None if value is None else round(float(value) / 1e6, 4)  # type: ignore[arg-type]


def _cap_entry(run: Path, info: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """One run folder as a ``caps`` entry of a buckets profile, and notes."""
    from traceql.analyzers.buckets import bucket_times
    from traceql.labelling.request import request
    from traceql.labelling.steps import rank_steps

    local = info["input"]["local_config"]
    results = manifest.read_results(run)
    sizes = next((r["ddp_buckets"] for r in results.values() if r.get("ddp_buckets")), None) or []
    entry: dict[str, Any] = {"cap_mb": local["cap_size"], "buckets": len(sizes), "bucket_bytes": sizes,
                             "allreduce_ms": [], "exposed_comm_ms": None, "overlap_tax_ms": None, "step_ms": None,
                             "batch": local["batchsize"], "source": None}
    notes = [] if sizes else [f"{run}: its ranks recorded no DDP buckets (collected before they were recorded?)"]
    if not info.get("files", {}).get("traces"):
        return entry, notes + [f"{run}: no trace (collected with --profiler none): no all-reduce times"]
    traced = rank_steps(request(run))
    times, steps = bucket_times(traced.arrivals), traced.steps
    entry.update(allreduce_ms=[round(t / 1e6, 4) for t in times["allreduce_ns"].to_list()],
                 exposed_comm_ms=_median_ms(steps["exposed_comm_ns"]),
                 overlap_tax_ms=_median_ms(steps["time_lost_ns"]), step_ms=_median_ms(steps["gpu_ns"]),
                 source=str(run))
    if sizes and len(sizes) != times.height:
        notes.append(f"{run}: {times.height} all-reduces a step against {len(sizes)} DDP buckets recorded")
    entry["buckets"] = entry["buckets"] or times.height
    return entry, notes


def buckets(runs: list[str | Path], out: str | Path, *, interconnect: str | None = None) -> tuple[Path, list[str]]:
    """A buckets profile from run folders of one model at one or more ``bucket_cap_mb``: per cap, the buckets
    and their all-reduce times, the exposed communication and overlap tax per step; the all-reduce model fitted
    to every bucket. Returns the file written into ``out`` and notes."""
    from traceql.analyzers.buckets import comm_model

    infos = []
    for run in map(Path, runs):
        info = manifest.read(run)
        if info is None:
            raise InputError("not a run folder of `traceql collect` (no manifest.json)", path=str(run))
        infos.append((run, info))
    models = {Path(info["input"]["path"]).name for _, info in infos}  # the input folder: the model
    worlds = {info["input"]["local_config"]["world_size"] for _, info in infos}
    if len(models) > 1 or len(worlds) > 1:
        raise InputError("the runs are of different models or world sizes: a buckets profile is of one of each",
                         path=str(infos[0][0]))
    entries, notes = [], []
    for run, info in infos:
        entry, more = _cap_entry(run, info)
        entries.append(entry)
        notes += more
    pairs = [(b, t) for e in entries for b, t in zip(e["bucket_bytes"], e["allreduce_ms"], strict=False)]
    gpus = {r.get("versions", {}).get("gpu") for run, _ in infos for r in manifest.read_results(run).values()}
    gpu = next(iter(sorted(g for g in gpus if g)), "cpu")
    one_host = all(len({r.get("host") for r in manifest.read_results(run).values()}) <= 1 for run, _ in infos)
    data = profile("buckets", next(iter(models)), gpu, world_size=worlds.pop(),
                   interconnect=interconnect or ("intra-node" if one_host else "network"),
                   comm_model=comm_model([p[0] for p in pairs], [p[1] for p in pairs]),
                   caps=sorted(entries, key=lambda e: e["cap_mb"]))
    return write_json(Path(out) / file_name("buckets", gpu), data), notes


def merge(folders: list[str | Path], out: str | Path) -> tuple[list[Path], list[str]]:
    """Gather the profile files of several nodes' folders into ``out``; of two files of one kind and GPU, the
    first given is kept (said in a note). Returns the files written and notes."""
    kept: dict[str, Path] = {}
    notes = []
    for folder in map(Path, folders):
        if not folder.is_dir():
            raise InputError("no such profile folder", path=str(folder))
        files = sorted(folder.glob("*.json"))
        if not files:
            raise InputError(f"no profile files (*.json of format {FORMAT}) in it", path=str(folder))
        for path in files:
            try:
                data = validate(json.loads(path.read_text()), str(path))
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise InputError(f"not JSON ({exc})", path=str(path)) from None
            name = file_name(data["kind"], data["gpu"])
            if name in kept:
                notes.append(f"{path}: {data['kind']} of {data['gpu']} already given by {kept[name]}; kept that")
                continue
            kept[name] = path
    Path(out).mkdir(parents=True, exist_ok=True)
    written = []
    for name, path in kept.items():
        if path.resolve() != (Path(out) / name).resolve():
            with atomic_path(Path(out) / name) as tmp:
                shutil.copyfile(path, tmp)
        written.append(Path(out) / name)
    return written, notes
