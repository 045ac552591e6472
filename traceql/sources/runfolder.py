"""A run folder of `traceql collect`: its manifest (``traceql.collectors.manifest``) and the traces it lists."""

from __future__ import annotations

import stat
from pathlib import Path, PurePosixPath
from typing import Any

from traceql.collectors import manifest as run_manifest
from traceql.errors import InputError

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
