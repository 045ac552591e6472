"""`traceql profile memory|compute|buckets|merge`: profile files of a model for `traceql solve`.

Memory and compute are measured by running the model (``traceql.collectors.profile_model``); buckets are read from
runs `traceql collect` made (their traces and the DDP buckets their ranks recorded); merge gathers the
folders several nodes wrote. The format is ``traceql.collectors.profile_format``'s. Memory and compute need only
torch (what a GPU node may be limited to): the trace analysis loads for ``buckets`` alone.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from traceql.collectors.fields import shown
from traceql.collectors.files import atomic_path, write_json
from traceql.collectors.profile_format import FORMAT, file_name, profile
from traceql.collectors.profiling import run_profile
from traceql.errors import InputError, OptionError
from traceql.sources.buckets import profiled_run, rank_results
from traceql.sources.outputs import check_folder_output
from traceql.tuning.profiles import read_profile

if TYPE_CHECKING:
    import polars as pl

__all__ = ["buckets", "compute", "memory", "merge"]

Progress = Callable[[str], None]
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
    file written into ``out``. ``memory_limit`` (bytes) bounds the search (needed on CPU).

    Args:
        input_dir: the model's input folder (``define_model.py``, ``local_config.json``).
        out: the profile folder (created when missing): not a file, not ``input_dir`` itself.
        memory_limit: the bytes a step may peak at (default: the GPU's memory); required on CPU.
        max_batch: the largest batch tried (batches are tried doubling from 1, then bisected); 1 to 2**31 - 1.
        progress: called with each line the search prints (a batch tried, whether it fits).

    Returns:
        The memory profile file written.

    Raises:
        OptionError: for a ``max_batch`` or ``memory_limit`` that is no integer of at least 1, or an ``out``
            that cannot be the profile folder.
        CollectError: for an input folder that is wrong, a machine that cannot run it, or a failed profiling.
    """
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
    profile in ``out`` found fitting, else 1 to 32 by powers of two); the profile file written into ``out``.

    Args:
        input_dir: the model's input folder (``define_model.py``, ``local_config.json``).
        out: the profile folder (created when missing): not a file, not ``input_dir`` itself.
        batches: the local batches to time, each 1 to 2**31 - 1 (a repeated one once); None: as above.
        warmup: steps run before the timed ones at each batch (0 or more).
        iterations: steps timed at each batch, whose medians are kept (1 or more).
        progress: called with each line the profiling prints (a batch timed).

    Returns:
        The compute profile file written.

    Raises:
        OptionError: for ``batches``, ``warmup`` or ``iterations`` out of range, or an ``out`` that cannot be
            the profile folder.
        CollectError: for an input folder that is wrong, a machine that cannot run it, or a failed profiling.
    """
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
    return None if value is None else round(float(cast(float, value)) / 1e6, 4)  # a median of ns: a number


def _cap_entry(run: Path, info: dict[str, Any], results: list[dict[str, Any]]) -> tuple[dict[str, Any], list[str]]:
    """One run folder as a ``caps`` entry of a buckets profile, and notes."""
    from traceql.analyzers.buckets import bucket_times
    from traceql.labelling.request import request
    from traceql.verdicts.ranks import rank_steps

    sizes = next((r["ddp_buckets"] for r in results if r.get("ddp_buckets")), None) or []
    entry: dict[str, Any] = {"cap_mb": info["cap"], "buckets": len(sizes), "bucket_bytes": sizes,
                             "allreduce_ms": [], "exposed_comm_ms": None, "overlap_tax_ms": None, "step_ms": None,
                             "batch": info["batch"], "source": None}
    notes = [] if sizes else [f"{run}: its ranks recorded no DDP buckets (collected before they were recorded?)"]
    if not info["traced"]:
        return entry, notes + [f"{run}: no trace (collected with --profiler none): no all-reduce times"]
    traced = rank_steps(request(run))
    assert traced.arrivals is not None  # rank_steps always gives the arrivals
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
    """The all-reduce line ``latency + size × ms_per_mb`` fitted to (bytes, ms) pairs by least squares
    (``analyzers.buckets.AllReduceTime``), neither term below 0 (where the free fit gives one below 0, it is held
    at 0 and the other fitted alone, and a note says so); None with fewer than two sizes."""
    from traceql.analyzers.buckets import AllReduceTime

    sizes, times = [p[0] for p in pairs], [p[1] * 1e6 for p in pairs]
    free = AllReduceTime.free(sizes, times, relative=False)
    if free is None:
        return None, []
    fitted = AllReduceTime.fit(sizes, times, relative=False)
    line = (fitted or free).to_profile(len(pairs))
    if fitted == free:
        return line, []
    was = free.to_profile(len(pairs))
    return line, [f"the all-reduce line fitted freely has a latency of {was['latency_ms']} ms and "
                  f"{was['ms_per_mb']} ms/MB; refitted with neither below 0"]


def buckets(runs: Sequence[str | Path], out: str | Path, *, interconnect: str | None = None) -> tuple[Path, list[str]]:
    """A buckets profile from run folders of one model at one or more ``bucket_cap_mb``: per cap, the buckets
    and their all-reduce times, the exposed communication and overlap tax per step; the all-reduce model fitted
    to every bucket. Returns the file written into ``out`` (a folder outside the runs) and notes.

    Args:
        runs: run folders of ``traceql collect``, one per ``bucket_cap_mb`` and local batch, of one model and
            world size.
        out: the profile folder (created when missing), outside the runs.
        interconnect: what the ranks talked over (``nvlink``, ``pcie``, ``network`` ...); None:
            ``intra-node`` when each run's ranks shared a host, else ``network``.

    Returns:
        The buckets profile file written, and notes.

    Raises:
        OptionError: for no runs, or an ``out`` that cannot be the profile folder.
        InputError: for a folder given twice, runs of different models or world sizes, two runs at one cap
            and batch, or a run folder that cannot be read.
    """
    paths = [Path(r) for r in runs]
    if not paths:
        raise OptionError("give one or more run folders of `traceql collect`")
    out = check_folder_output(out, "--out", inputs=paths)
    _once(paths)
    infos = [(run, info, rank_results(run, info["world"])) for run, info in [(run, profiled_run(run)) for run in paths]]
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


def merge(folders: Sequence[str | Path], out: str | Path) -> tuple[list[Path], list[str]]:
    """Gather the profile files of several nodes' folders (one model's) into ``out``, a folder outside them; of
    two files of one kind and GPU, the first given is kept (said in a note). Returns the files written and
    notes.

    Args:
        folders: the nodes' profile folders, of one model.
        out: the profile folder to gather them into (created when missing), outside them.

    Returns:
        The profile files written, and notes.

    Raises:
        OptionError: for an ``out`` that cannot be the profile folder.
        InputError: for a folder given twice, missing or holding no profile, a profile that cannot be read, or
            profiles of two models.
    """
    dirs = [Path(f) for f in folders]
    out = check_folder_output(out, "--out", inputs=dirs)
    _once(dirs)
    kept: dict[str, Path] = {}
    model: tuple[str, Path] | None = None
    notes = []
    for folder in dirs:
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
