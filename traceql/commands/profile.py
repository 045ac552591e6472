"""`traceql profile memory|compute|buckets|merge`: profile files of a model for `traceql solve`.

Memory and compute are measured by running the model (``traceql.collectors.profile_model``); buckets are read from
runs `traceql collect` made (their traces and the DDP buckets their ranks recorded); merge gathers the
folders several nodes wrote. The format is ``traceql.collectors.profile_format``'s. Memory and compute need only
torch (what a GPU node may be limited to): the trace analysis loads for ``buckets`` alone.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from traceql.collectors import manifest
from traceql.collectors.fields import Field, integer, number, of_type, shown
from traceql.collectors.files import atomic_path, write_json
from traceql.collectors.profile_format import FORMAT, file_name, profile
from traceql.collectors.profiling import run_profile
from traceql.errors import InputError, OptionError
from traceql.jsonfile import load_json
from traceql.sources.outputs import check_folder_output
from traceql.tuning.profiles import read_profile

if TYPE_CHECKING:
    import polars as pl

__all__ = ["buckets", "compute", "memory", "merge"]

Progress = Callable[[str], None]
# what a buckets profile reads of a run's manifest: (dotted key, what it must be, what it records)
RUN_KEYS: tuple[tuple[str, Field, str], ...] = (
    ("input.path", of_type("a string", str), "the model (its input folder)"),
    ("input.local_config.world_size", integer(1), "the world size"),
    ("input.local_config.batchsize", integer(1), "the local batch"),
    ("input.local_config.cap_size", number(0, above=True), "the bucket cap (bucket_cap_mb)"),
)


MAX_BATCH = 2**31 - 1  # a batch no device holds: past it, the option is a typing mistake


def _positive(value: Any, option: str, most: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1 or (most is not None and value > most):
        upto = f" and at most {most:,}" if most is not None else ""
        raise OptionError(f"{option} must be an integer of at least 1{upto}, got {shown(value)}")


def _once(paths: list[Path]) -> None:
    """InputError for a folder given twice (under two spellings too)."""
    seen: dict[Path, Path] = {}
    for path in paths:
        key = path.resolve() if path.exists() else path
        if key in seen:
            raise InputError(f"given twice (also as {seen[key]})" if str(seen[key]) != str(path) else "given twice",
                             path=str(path))
        seen[key] = path


def _profile_out(out: str | Path, input_dir: str | Path) -> Path:
    """``out`` when a profile folder may be made there: a folder or a new name, not a file, not the model's
    input folder itself (a folder inside it is fine: the input folder is no trace)."""
    out = check_folder_output(out, "--out")
    try:
        same = out.exists() and Path(input_dir).is_dir() and out.resolve() == Path(input_dir).resolve()
    except (OSError, RuntimeError):
        same = False
    if same:
        raise OptionError(f"--out {out}: is the model's input folder; give a profile folder of its own (a "
                          "folder inside it will do)")
    return out


def memory(input_dir: str | Path, out: str | Path, *, memory_limit: int | None = None, max_batch: int = 1024,
           progress: Progress | None = None) -> Path:
    """The largest local batch that fits, and the virtual workers that fit at each batch tried; the profile
    file written into ``out``. ``memory_limit`` (bytes) bounds the search (needed on CPU)."""
    _positive(max_batch, "--max-batch", MAX_BATCH)
    if memory_limit is not None:
        _positive(memory_limit, "--memory-limit")
    out = _profile_out(out, input_dir)
    args = ["--max-batch", str(max_batch)] + (["--memory-limit", str(memory_limit)] if memory_limit else [])
    return run_profile("memory", input_dir, out, args, progress)


def _fitting_batches(out: Path) -> list[int] | None:
    """The batches a memory profile in ``out`` found fitting (powers of two, and the largest), if any."""
    for path in sorted(out.glob("memory-*.json")) if out.is_dir() else []:
        data = read_profile(path)
        fit = [r["batch"] for r in data["batches"] if r["fits"]]
        if fit:
            return sorted({b for b in fit if b & (b - 1) == 0} | {max(fit)})
    return None


def compute(input_dir: str | Path, out: str | Path, *, batches: list[int] | None = None, warmup: int = 3,
            iterations: int = 10, progress: Progress | None = None) -> Path:
    """Forward, backward and optimizer time per local batch (``batches``, each once; default: those the memory
    profile in ``out`` found fitting, else 1 to 32 by powers of two); the profile file written into ``out``."""
    if batches is not None and (not batches or any(isinstance(b, bool) or not isinstance(b, int)
                                                   or not 1 <= b <= MAX_BATCH for b in batches)):
        raise OptionError(f"--batches must be batch sizes from 1 to {MAX_BATCH:,}, e.g. 1,2,4,8")
    _positive(iterations, "--iterations")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise OptionError(f"--warmup must be an integer of at least 0, got {shown(warmup)}")
    out = _profile_out(out, input_dir)
    chosen = list(dict.fromkeys(batches)) if batches else _fitting_batches(out) or [1, 2, 4, 8, 16, 32]
    args = ["--batches", ",".join(map(str, chosen)), "--warmup", str(warmup), "--iterations", str(iterations)]
    return run_profile("compute", input_dir, out, args, progress)


def _median_ms(values: pl.Series) -> float | None:
    value = values.median()
    return None if value is None else round(float(value) / 1e6, 4)  # type: ignore[arg-type]


def _run(run: Path) -> dict[str, Any]:
    """What a buckets profile reads of a run folder's manifest (``model, world, batch, cap, traced``); an
    InputError naming the run folder or its manifest when it is not one of `traceql collect` or lacks a key."""
    if not run.is_dir():
        raise InputError("no such run folder" if not run.exists() else "not a folder (expected a run folder of "
                         "`traceql collect`)", path=str(run))
    path = run / "manifest.json"
    if not path.exists() and not path.is_symlink():
        raise InputError("not a run folder of `traceql collect` (no manifest.json)", path=str(run))
    info = load_json(path)
    if not isinstance(info, dict) or not str(info.get("format", "")).startswith(manifest.FORMAT_PREFIX):
        raise InputError(f"not the manifest of a run of `traceql collect` (its format must be {manifest.FORMAT!r})",
                         path=str(path))
    found = {}
    for key, field, what in RUN_KEYS:
        value: Any = info
        parts = key.split(".")
        for i, part in enumerate(parts):
            if not isinstance(value, dict):
                raise InputError(f"{'.'.join(parts[:i])} must be an object, got {shown(value)} (edited by hand?)",
                                 path=str(path))
            if part not in value:
                raise InputError(f"no {'.'.join(parts[:i + 1])}: it records {what}, which a buckets profile needs "
                                 "(a manifest edited by hand, or of an older collection?)", path=str(path))
            value = value[part]
        if not field.test(value) or (isinstance(value, str) and not value.strip()):
            raise InputError(f"{key} must be {field.what}, got {shown(value)}", path=str(path))
        found[parts[-1]] = value
    files = info.get("files", {})
    traces = files.get("traces", []) if isinstance(files, dict) else None
    if not isinstance(traces, list) or not all(isinstance(t, str) for t in traces):
        raise InputError(f"files.traces must be a list of paths, got {shown(traces if files else files)}",
                         path=str(path))
    return {"model": Path(found["path"]).name, "world": found["world_size"], "batch": found["batchsize"],
            "cap": found["cap_size"], "traced": bool(traces)}


def _results(run: Path, world: int) -> list[dict[str, Any]]:
    """The ranks' result files of a run of ``world`` ranks (``results/rank*.json``), checked for what a buckets
    profile reads."""
    out = []
    for path in sorted((run / "results").glob("rank*.json")):
        data = load_json(path)
        if not isinstance(data, dict):
            raise InputError(f"not a rank's result (expected a JSON object, got {shown(data)})", path=str(path))
        if "rank" in data and not integer(0, most=world - 1).test(data["rank"]):
            raise InputError(f"rank must be a rank of the run, an integer from 0 to {world - 1} (world_size {world}),"
                             f" got {shown(data['rank'])}", path=str(path))
        sizes, versions = data.get("ddp_buckets"), data.get("versions")
        if sizes is not None and not (isinstance(sizes, list) and all(integer(0).test(b) for b in sizes)):
            raise InputError(f"ddp_buckets must be a list of byte counts, got {shown(sizes)}", path=str(path))
        if versions is not None and not (isinstance(versions, dict)
                                         and isinstance(versions.get("gpu"), (str, type(None)))):
            raise InputError(f"versions must be an object whose gpu is a string, got {shown(versions)}",
                             path=str(path))
        out.append(data)
    return out


def _cap_entry(run: Path, info: dict[str, Any], results: list[dict[str, Any]]) -> tuple[dict[str, Any], list[str]]:
    """One run folder as a ``caps`` entry of a buckets profile, and notes."""
    from traceql.analyzers.buckets import bucket_times
    from traceql.labelling.request import request
    from traceql.labelling.steps import rank_steps

    sizes = next((r["ddp_buckets"] for r in results if r.get("ddp_buckets")), None) or []
    entry: dict[str, Any] = {"cap_mb": info["cap"], "buckets": len(sizes), "bucket_bytes": sizes,
                             "allreduce_ms": [], "exposed_comm_ms": None, "overlap_tax_ms": None, "step_ms": None,
                             "batch": info["batch"], "source": None}
    notes = [] if sizes else [f"{run}: its ranks recorded no DDP buckets (collected before they were recorded?)"]
    if not info["traced"]:
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


def _line(pairs: list[tuple[int, float]]) -> tuple[dict[str, Any] | None, list[str]]:
    """The all-reduce line ``latency + size × ms_per_mb`` fitted to (bytes, ms) pairs by least squares, neither
    term below 0 (where the free fit gives one below 0, it is held at 0 and the other fitted alone)."""
    from traceql.analyzers.buckets import MB, comm_model

    fitted = comm_model([p[0] for p in pairs], [p[1] for p in pairs])
    if fitted is None or (fitted["latency_ms"] >= 0 and fitted["ms_per_mb"] >= 0):
        return fitted, []
    x, y = [p[0] / MB for p in pairs], [p[1] for p in pairs]
    candidates = [(0.0, max(0.0, sum(a * b for a, b in zip(x, y, strict=True)) / sum(a * a for a in x))),
                  (max(0.0, sum(y) / len(y)), 0.0)]
    latency, slope = min(candidates, key=lambda c: sum((b - c[0] - c[1] * a) ** 2 for a, b in zip(x, y, strict=True)))
    note = (f"the all-reduce line fitted freely has a latency of {fitted['latency_ms']} ms and "
            f"{fitted['ms_per_mb']} ms/MB; refitted with neither below 0")
    return {"latency_ms": round(latency, 4), "ms_per_mb": round(slope, 5), "samples": len(x)}, [note]


def buckets(runs: list[str | Path], out: str | Path, *, interconnect: str | None = None) -> tuple[Path, list[str]]:
    """A buckets profile from run folders of one model at one or more ``bucket_cap_mb``: per cap, the buckets
    and their all-reduce times, the exposed communication and overlap tax per step; the all-reduce model fitted
    to every bucket. Returns the file written into ``out`` (a folder outside the runs) and notes."""
    runs = [Path(r) for r in runs]
    if not runs:
        raise OptionError("give one or more run folders of `traceql collect`")
    out = check_folder_output(out, "--out", inputs=runs)
    _once(runs)
    infos = [(run, info, _results(run, info["world"])) for run, info in [(run, _run(run)) for run in runs]]
    first_run, first, _ = infos[0]
    caps: dict[tuple[float, int], Path] = {}
    for run, info, _ in infos:
        if (info["model"], info["world"]) != (first["model"], first["world"]):
            raise InputError(f"a run of {shown(info['model'])} on {info['world']} ranks, {first_run} one of "
                             f"{shown(first['model'])} on {first['world']}: a buckets profile is of one model and "
                             "world size", path=str(run))
        key = (info["cap"], info["batch"])
        if key in caps:
            raise InputError(f"a second run at bucket_cap_mb {key[0]:g} and local batch {key[1]} (the first: "
                             f"{caps[key]}); a buckets profile takes one run of each", path=str(run))
        caps[key] = run
    entries, notes = [], []
    for run, info, results in infos:
        entry, more = _cap_entry(run, info, results)
        entries.append(entry)
        notes += more
    comm, more = _line([(b, t) for e in entries for b, t in zip(e["bucket_bytes"], e["allreduce_ms"], strict=False)])
    gpus = {(r.get("versions") or {}).get("gpu") for _, _, results in infos for r in results}
    gpu = next(iter(sorted(g for g in gpus if g)), "cpu")
    one_host = all(len({r.get("host") for r in results if isinstance(r.get("host"), str)}) <= 1
                   for _, _, results in infos)
    data = profile("buckets", first["model"], gpu, world_size=first["world"],
                   interconnect=interconnect or ("intra-node" if one_host else "network"),
                   comm_model=comm, caps=sorted(entries, key=lambda e: e["cap_mb"]))
    return write_json(out / file_name("buckets", gpu), data), notes + more


def merge(folders: list[str | Path], out: str | Path) -> tuple[list[Path], list[str]]:
    """Gather the profile files of several nodes' folders (one model's) into ``out``, a folder outside them; of
    two files of one kind and GPU, the first given is kept (said in a note). Returns the files written and
    notes."""
    folders = [Path(f) for f in folders]
    out = check_folder_output(out, "--out", inputs=folders)
    _once(folders)
    kept: dict[str, Path] = {}
    model: tuple[str, Path] | None = None
    notes = []
    for folder in folders:
        if not folder.is_dir():
            raise InputError("no such profile folder" if not folder.exists() else "not a folder (expected a "
                             "folder of profiles)", path=str(folder))
        files = sorted(folder.glob("*.json"))
        if not files:
            raise InputError(f"no profile files (*.json of format {FORMAT}) in it", path=str(folder))
        for path in files:
            data = read_profile(path)
            model = model or (data["model"], path)
            if data["model"] != model[0]:
                raise InputError(f"a profile of {shown(data['model'])}, {model[1]} one of {shown(model[0])}; a "
                                 "profile folder holds one model's profiles", path=str(path))
            name = file_name(data["kind"], data["gpu"])
            if name in kept:
                notes.append(f"{path}: {data['kind']} of {data['gpu']} already given by {kept[name]}; kept that")
                continue
            kept[name] = path
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, path in kept.items():
        with atomic_path(out / name) as tmp:
            shutil.copyfile(path, tmp)
        written.append(out / name)
    return written, notes
