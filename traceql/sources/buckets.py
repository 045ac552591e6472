"""A run's DDP buckets and its model's gradient sizes, as its run folder records them and as a gradients file
gives them: what `whatif --bucket-cap`, `collectives` and `profile buckets` read.

The gradient sizes (bytes of each trained parameter's gradient, in the order the model registered them) come from
the run folder's rank results (``param_bytes``: `traceql collect` records them) or from a *gradients file* the
user names (``--gradients``): a JSON object ``{"param_bytes": [...], "bucket_cap_mb": 25}``, the second key the
run's own cap, for a trace collected some other way; a rank result (``results/rank0.json``) is such a file too.
The run's own buckets: as its ranks recorded them (``ddp_buckets``), else DDP's packing of the gradients at its
cap (the gradients file's, else its manifest's ``cap_size``: :func:`gradients_of`, packed by
``analyzers.buckets.own_buckets``). A buckets profile reads a run folder's manifest and rank results checked for what it
needs (:func:`profiled_run`, :func:`rank_results`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from traceql.collectors import manifest
from traceql.collectors.fields import Field, integer, number, of_type
from traceql.collectors.fields import shown as json_shown
from traceql.errors import InputError
from traceql.jsonfile import load_json
from traceql.sources import inputs

HOW = "pass --gradients FILE (a JSON file of the model's gradient sizes: docs/commands/whatif.md)"
# what a buckets profile reads of a run's manifest: (dotted key, what it must be, what it records)
RUN_KEYS: tuple[tuple[str, Field, str], ...] = (
    ("input.path", of_type("a string", str), "the model (its input folder)"),
    ("input.local_config.world_size", integer(1), "the world size"),
    ("input.local_config.batchsize", integer(1), "the local batch"),
    ("input.local_config.cap_size", number(0, above=True), "the bucket cap (bucket_cap_mb)"),
)


@dataclass(frozen=True)
class Gradients:
    """What a run records or a gradients file gives of DDP's buckets: the buckets its ranks reduced
    (``recorded``), the model's gradient sizes (``param_bytes``) and, where it recorded no buckets, the run's cap
    (``cap_mb``: the one its buckets are packed at); None: unknown."""

    recorded: list[int] | None
    param_bytes: list[int] | None
    cap_mb: float | None


def gradients_of(folder: Path | None, given: dict[str, Any]) -> Gradients:
    """What the run folder ``folder`` (None: loose traces) records and ``given`` (a checked gradients file:
    :func:`given_by`) gives: the file's gradient sizes and cap over the folder's."""
    recorded = recorded_by(folder) if folder is not None else {}
    buckets = [int(b) for b in recorded["ddp_buckets"]] if recorded.get("ddp_buckets") else None
    cap = None if buckets else given.get("bucket_cap_mb") or _manifest_cap(folder)  # packing needs it
    return Gradients(buckets, given.get("param_bytes") or recorded.get("param_bytes"), cap)


def run_folder(paths: list[Path] | None) -> Path | None:
    """The `traceql collect` run folder a run's inputs come from (None: loose traces)."""
    for p in paths or [inputs.DEFAULT_TRACE]:
        for folder in (p, p.parent.parent if p.parent.name == "traces" else None):
            if folder is not None and (folder / "manifest.json").is_file():
                return folder
    return None


def given_by(gradients: Path | None) -> dict[str, Any]:
    """A gradients file's ``param_bytes`` (required) and ``bucket_cap_mb``, checked; empty for None."""
    return _checked(load_json(gradients), gradients, required=True) if gradients is not None else {}


def recorded_by(folder: Path) -> dict[str, Any]:
    """What a run folder's ranks recorded of its gradients (``param_bytes``, ``ddp_buckets``: the first rank
    result that has them), checked; empty when none has."""
    for path in sorted((folder / "results").glob("rank*.json")):
        data = load_json(path)
        if isinstance(data, dict) and (data.get("param_bytes") or data.get("ddp_buckets")):
            return _checked(data, path)
    return {}


def _checked(data: Any, path: Path, *, required: bool = False) -> dict[str, Any]:
    """A gradients file's (or rank result's) ``param_bytes``, ``ddp_buckets`` and ``bucket_cap_mb``, checked."""
    if not isinstance(data, dict):
        raise InputError("not a gradients file (expected a JSON object with param_bytes)", path=str(path))
    out: dict[str, Any] = {}
    for key in ("param_bytes", "ddp_buckets"):
        value = data.get(key)
        if value is None:
            continue
        if not isinstance(value, list) or not value or not all(
                isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value):
            raise InputError(f"{key} must be a list of byte counts above 0, got {shown(value)}", path=str(path))
        out[key] = value
    cap = data.get("bucket_cap_mb")
    if cap is not None:
        if isinstance(cap, bool) or not isinstance(cap, (int, float)) or not math.isfinite(cap) or cap <= 0:
            raise InputError(f"bucket_cap_mb must be a size in MB above 0, got {shown(cap)}", path=str(path))
        out["bucket_cap_mb"] = float(cap)
    if required and "param_bytes" not in out:
        raise InputError("no param_bytes: a gradients file lists the model's gradient sizes in bytes, in the order "
                         "the model registers its parameters", path=str(path))
    return out


def _manifest_cap(folder: Path | None) -> float | None:
    if folder is None:
        return None
    data = load_json(folder / "manifest.json")
    local = data.get("input", {}).get("local_config", {}) if isinstance(data, dict) else {}
    cap = local.get("cap_size") if isinstance(local, dict) else None
    if isinstance(cap, (int, float)) and not isinstance(cap, bool) and math.isfinite(cap) and cap > 0:
        return float(cap)
    return None


def shown(value: Any) -> str:
    """A value as an error line shows it (at most 40 characters)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def profiled_run(run: Path) -> dict[str, Any]:
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
                raise InputError(f"{'.'.join(parts[:i])} must be an object, got {json_shown(value)} (edited by hand?)",
                                 path=str(path))
            if part not in value:
                raise InputError(f"no {'.'.join(parts[:i + 1])}: it records {what}, which a buckets profile needs "
                                 "(a manifest edited by hand, or of an older collection?)", path=str(path))
            value = value[part]
        if not field.test(value) or (isinstance(value, str) and not value.strip()):
            raise InputError(f"{key} must be {field.what}, got {json_shown(value)}", path=str(path))
        found[parts[-1]] = value
    files = info.get("files", {})
    traces = files.get("traces", []) if isinstance(files, dict) else None
    if not isinstance(traces, list) or not all(isinstance(t, str) for t in traces):
        raise InputError(f"files.traces must be a list of paths, got {json_shown(traces if files else files)}",
                         path=str(path))
    return {"model": Path(found["path"]).name, "world": found["world_size"], "batch": found["batchsize"],
            "cap": found["cap_size"], "traced": bool(traces)}


def rank_results(run: Path, world: int) -> list[dict[str, Any]]:
    """The ranks' result files of a run of ``world`` ranks (``results/rank*.json``), checked for what a buckets
    profile reads."""
    out = []
    for path in sorted((run / "results").glob("rank*.json")):
        data = load_json(path)
        if not isinstance(data, dict):
            raise InputError(f"not a rank's result (expected a JSON object, got {json_shown(data)})", path=str(path))
        if "rank" in data and not integer(0, most=world - 1).test(data["rank"]):
            raise InputError(f"rank must be a rank of the run, an integer from 0 to {world - 1} (world_size {world}),"
                             f" got {json_shown(data['rank'])}", path=str(path))
        sizes, versions = data.get("ddp_buckets"), data.get("versions")
        if sizes is not None and not (isinstance(sizes, list) and all(integer(0).test(b) for b in sizes)):
            raise InputError(f"ddp_buckets must be a list of byte counts, got {json_shown(sizes)}", path=str(path))
        if versions is not None and not (isinstance(versions, dict)
                                         and isinstance(versions.get("gpu"), (str, type(None)))):
            raise InputError(f"versions must be an object whose gpu is a string, got {json_shown(versions)}",
                             path=str(path))
        out.append(data)
    return out
