"""What `whatif --bucket-cap` needs of a run: its model's gradient sizes and the buckets the run itself reduced.

The gradient sizes (bytes of each trained parameter's gradient, in the order the model registered them) come from
the run folder's rank results (``param_bytes``: `traceql collect` records them) or from a *gradients file* the
user names (``--gradients``): a JSON object ``{"param_bytes": [...], "bucket_cap_mb": 25}``, the second key the
run's own cap, for a trace collected some other way; a rank result (``results/rank0.json``) is such a file too.
The run's own buckets: as its ranks recorded them (``ddp_buckets``), else DDP's packing of the gradients at its
cap (the gradients file's, else its manifest's ``cap_size``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from traceql.analyzers.replay.rebucket import pack
from traceql.errors import InputError, OptionError
from traceql.jsonfile import load_json
from traceql.sources import inputs

HOW = "pass --gradients FILE (a JSON file of the model's gradient sizes: docs/commands/whatif.md)"


@dataclass(frozen=True)
class Rebucketing:
    """The run's own buckets and those of the cap asked for (bytes, in reduce order)."""

    cap_mb: float
    old: list[int]
    new: list[int]


def run_folder(paths: list[Path] | None) -> Path | None:
    """The `traceql collect` run folder a run's inputs come from (None: loose traces)."""
    for p in paths or [inputs.DEFAULT_TRACE]:
        for folder in (p, p.parent.parent if p.parent.name == "traces" else None):
            if folder is not None and (folder / "manifest.json").is_file():
                return folder
    return None


def rebucketing(paths: list[Path] | None, cap_mb: float, gradients: Path | None = None) -> Rebucketing:
    """The buckets of the run of ``paths`` (one of ``Request.runs()``) and DDP's at ``cap_mb`` (module doc)."""
    if isinstance(cap_mb, bool) or not isinstance(cap_mb, (int, float)) or not math.isfinite(cap_mb) or cap_mb <= 0:
        raise OptionError(f"--bucket-cap must be a size in MB above 0, got {cap_mb!r}")
    folder = run_folder(paths)
    recorded = recorded_by(folder) if folder is not None else {}
    given = given_by(gradients)
    params = given.get("param_bytes") or recorded.get("param_bytes")
    where = str(folder) if folder is not None else ", ".join(map(str, paths or []))
    if not params:
        raise OptionError(f"--bucket-cap needs the model's gradient sizes, and {where} records none (collected "
                          f"before `traceql collect` recorded them, or some other way): {HOW}")
    old = run_buckets(folder, given)
    if old is None:  # the gradients are known (above): the run's cap is not
        raise OptionError(f"--bucket-cap needs the run's own bucket cap, and {where} records none: add "
                          '"bucket_cap_mb" to the gradients file')
    return Rebucketing(float(cap_mb), old, pack(params, cap_mb))


def given_by(gradients: Path | None) -> dict[str, Any]:
    """A gradients file's ``param_bytes`` (required) and ``bucket_cap_mb``, checked; empty for None."""
    return _checked(load_json(gradients), gradients, required=True) if gradients is not None else {}


def run_buckets(folder: Path | None, given: dict[str, Any]) -> list[int] | None:
    """A run's own DDP buckets (bytes, in reduce order): as its ranks recorded them, else DDP's packing of the
    gradients (``given``'s, a checked gradients file, else the recorded ones) at the run's cap (the file's, else
    the manifest's); None where neither is known."""
    recorded = recorded_by(folder) if folder is not None else {}
    if recorded.get("ddp_buckets"):
        return [int(b) for b in recorded["ddp_buckets"]]
    params = given.get("param_bytes") or recorded.get("param_bytes")
    cap = given.get("bucket_cap_mb") or _manifest_cap(folder)
    return pack(params, cap) if params and cap is not None else None


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
    out = {}
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
    ok = isinstance(cap, (int, float)) and not isinstance(cap, bool) and math.isfinite(cap) and cap > 0
    return float(cap) if ok else None


def shown(value: Any) -> str:
    """A value as an error line shows it (at most 40 characters)."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
