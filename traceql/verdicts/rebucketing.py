"""What `whatif --bucket-cap` needs of a run: the buckets it reduced and DDP's buckets at the cap asked for, from
its model's gradient sizes (``traceql.sources.buckets``: the run folder's rank results, or a gradients file)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from traceql.analyzers.buckets import own_buckets, pack
from traceql.errors import OptionError
from traceql.sources.buckets import HOW, given_by, gradients_of, run_folder


@dataclass(frozen=True)
class Rebucketing:
    """The run's own buckets and those of the cap asked for (bytes, in reduce order)."""

    cap_mb: float
    old: list[int]
    new: list[int]


def checked_cap(cap_mb: float) -> float:
    """``--bucket-cap``: a size in MB above 0 (OptionError for anything else)."""
    if isinstance(cap_mb, bool) or not isinstance(cap_mb, (int, float)) or not math.isfinite(cap_mb) or cap_mb <= 0:
        raise OptionError(f"--bucket-cap must be a size in MB above 0, got {cap_mb!r}")
    return float(cap_mb)


def rebucketing(paths: list[Path] | None, cap_mb: float, gradients: Path | None = None) -> Rebucketing:
    """The buckets of the run of ``paths`` (one of ``Request.runs()``) and DDP's at ``cap_mb``, from the
    gradient sizes its run folder records or ``gradients`` gives."""
    cap_mb = checked_cap(cap_mb)
    folder = run_folder(paths)
    known = gradients_of(folder, given_by(gradients))
    where = str(folder) if folder is not None else ", ".join(map(str, paths or []))
    if not known.param_bytes:
        raise OptionError(f"--bucket-cap needs the model's gradient sizes, and {where} records none (collected "
                          f"before `traceql collect` recorded them, or some other way): {HOW}")
    old = own_buckets(known.recorded, known.param_bytes, known.cap_mb)
    if old is None:  # the gradients are known (above): the run's cap is not
        raise OptionError(f"--bucket-cap needs the run's own bucket cap, and {where} records none: add "
                          '"bucket_cap_mb" to the gradients file')
    return Rebucketing(cap_mb, old, pack(known.param_bytes, cap_mb))
