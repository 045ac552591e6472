"""A run folder of `traceql collect`: its manifest (``traceql.collectors.manifest``) and the traces it lists."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from traceql.collectors import manifest as run_manifest
from traceql.errors import InputError


def read_manifest(path: Path) -> dict[str, Any] | None:
    """The manifest of a run folder; None for any other path."""
    return run_manifest.read(path) if Path(path).is_dir() else None


def run_name(path: Path, manifest: dict[str, Any]) -> str:
    """The run's name: as the collection named it, else the folder's."""
    return manifest.get("run_name") or Path(path).resolve().name


def trace_paths(path: Path, manifest: dict[str, Any]) -> list[Path]:
    """The traces a run folder's manifest lists; InputError when it lists none (and why)."""
    traces = manifest.get("files", {}).get("traces", [])
    if not traces:
        why = ("collected with --profiler none: no traces (per-rank step times are in manifest.json)"
               if manifest.get("profiler", {}).get("name") == "none"
               else f"a run folder with no traces (status {manifest.get('status')}; see its logs/)")
        raise InputError(why, path=str(path))
    return [Path(path) / rel for rel in traces]
