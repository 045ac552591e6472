"""A run folder of `traceql collect`: its manifest (``traceql.collectors.manifest``) and the traces it lists."""

from __future__ import annotations

import stat
from pathlib import Path, PurePosixPath
from typing import Any

from traceql.collectors import manifest as run_manifest
from traceql.errors import InputError
from traceql.jsonfile import load_json

MANIFEST = "manifest.json"
MAX_MANIFEST_BYTES = 64 << 20  # a manifest is a few kB: anything far larger is not one


def read_manifest(path: Path) -> dict[str, Any] | None:
    """The manifest of a run folder; None for any other path (a folder without a readable manifest, a file,
    a path the OS cannot look at)."""
    try:
        st = (Path(path) / MANIFEST).stat()
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_MANIFEST_BYTES:  # a FIFO would block forever
            return None
        return run_manifest.read(path)
    except (OSError, ValueError, RecursionError):  # unreadable, not UTF-8, nested too deeply
        return None


def run_name(path: Path, manifest: dict[str, Any]) -> str:
    """The run's name: as the collection named it, else the folder's."""
    name = manifest.get("run_name")
    return name if isinstance(name, str) and name.strip() else Path(path).resolve().name


def _damaged(path: Path, what: str) -> InputError:
    return InputError(f"{what}: a damaged or hand-edited manifest? (traceql collect writes it)",
                      path=str(Path(path) / MANIFEST))


def trace_paths(path: Path, manifest: dict[str, Any]) -> list[Path]:
    """The traces a run folder's manifest lists; InputError when it lists none (and why), or lists them as
    anything but paths inside the folder."""
    files = manifest.get("files", {})
    if not isinstance(files, dict):
        raise _damaged(path, f"\"files\" is not an object (found {type(files).__name__})")
    traces = files.get("traces") or []
    if not isinstance(traces, list) or not all(isinstance(t, str) and t and "\x00" not in t for t in traces):
        raise _damaged(path, "\"files.traces\" is not a list of file names")
    for rel in traces:
        parts = PurePosixPath(rel).parts
        if PurePosixPath(rel).is_absolute() or ".." in parts:
            raise _damaged(path, f"it lists a trace outside the run folder ({rel!r})")
    if not traces:
        profiler = manifest.get("profiler")
        why = ("collected with --profiler none: no traces (per-rank step times are in manifest.json)"
               if isinstance(profiler, dict) and profiler.get("name") == "none"
               else f"a run folder with no traces (status {manifest.get('status')}; see its logs/)")
        raise InputError(why, path=str(path))
    return [Path(path) / rel for rel in traces]


def step_times(folder: Path) -> list[list[dict[str, Any]]]:
    """Each rank's step times as `traceql collect` recorded them (``results/rank<r>.json``'s ``step_times_ms``:
    epoch, step, ms, whether in the profiled window, whether isolated), the entries that are objects; a rank
    result that cannot be read, or records none, gives nothing (the times only add a note)."""
    out = []
    for path in sorted((Path(folder) / "results").glob("rank*.json")):
        try:
            data = load_json(path)
        except InputError:
            continue
        times = data.get("step_times_ms") if isinstance(data, dict) else None
        if isinstance(times, list):
            out.append([t for t in times if isinstance(t, dict)])
    return out


def injected_steps(manifest: dict[str, Any]) -> set[int]:
    """The window steps a run's local_config made late (``straggler``, ``gpu_delay``: `traceql collect --set`)."""
    local = (manifest.get("input") or {}).get("local_config") if isinstance(manifest.get("input"), dict) else None
    out: set[int] = set()
    for key in ("straggler", "gpu_delay"):
        found = local.get(key) if isinstance(local, dict) else None
        steps = found.get("steps") if isinstance(found, dict) else None
        if isinstance(steps, list):
            out |= {s for s in steps if isinstance(s, int) and not isinstance(s, bool)}
    return out
