"""`traceql collect`: run a training input folder under a profiler; returns the run's manifest."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any

from traceql import collecting
from traceql.collecting import collect_errors, run_collection
from traceql.collectors.launch_options import LaunchOptions
from traceql.collectors.profilers import ProfilerOptions

PROFILER_FIELDS = {f.name for f in fields(ProfilerOptions)}
LAUNCH_FIELDS = {f.name for f in fields(LaunchOptions)} - {"profile_ranks", "env"}


def collect(input_dir: str | Path, *, out: Path | None = None, ranks: str | None = None,
            overrides: list[str] | None = None, progress: Callable[[str], None] | None = None,
            profiler: str = "none", **settings: Any) -> dict[str, Any]:
    """Run the training in ``input_dir`` under ``profiler`` (nsys, ncu, torch or none) and return the run
    folder's manifest.

    ``settings`` are fields of :class:`traceql.collectors.profilers.ProfilerOptions` (``steps``, ``nsys_*``,
    ``ncu_*``, ``torch_*``) and :class:`traceql.collectors.launch.LaunchOptions` (``device``, ``timeout``,
    ``launcher``, ``nnodes``, ``rdzv_*`` …); ``ranks`` (``"0,4"``) are the ranks to profile, ``overrides``
    (``["cap_size=2"]``) replace local_config values. Failures raise :class:`traceql.errors.CollectFailed`.
    """
    unknown = set(settings) - PROFILER_FIELDS - LAUNCH_FIELDS
    if unknown:
        raise TypeError(f"collect() got unknown settings: {', '.join(sorted(unknown))}")
    with collect_errors():
        opts = ProfilerOptions(name=profiler, **{k: v for k, v in settings.items() if k in PROFILER_FIELDS})
        launch = LaunchOptions(profile_ranks=collecting.ranks_option(ranks),
                               **{k: v for k, v in settings.items() if k in LAUNCH_FIELDS})
    return run_collection(input_dir, opts, out=out, launch=launch, overrides=collecting.overrides(overrides),
                          progress=progress)
