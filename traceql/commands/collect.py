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

    Args:
        input_dir: the training input folder (``define_model.py``, ``local_config.json``; optionally
            ``global_config.json`` and ``train_script.py``).
        out: the run folder (new or empty, outside ``input_dir``); None: ``runs/<model>-<profiler>-<time>``.
        ranks: the ranks to profile, comma-separated (``"0,4"``); None: all. The others run unprofiled.
        overrides: ``KEY=VALUE`` items (``--set``) replacing local_config values, each value JSON where it
            parses as JSON, else a string.
        progress: called with a line (seconds elapsed, ranks finished) while the ranks run.
        profiler: ``nsys``, ``ncu``, ``torch`` or ``none`` (the training alone, no profiler).
        **settings: the profiler's and the launch's other options by field name, as above.

    Returns:
        The run folder's manifest (as written to its ``manifest.json``).

    Raises:
        TypeError: for a setting that is no field of either.
        OptionError: for ``ranks`` or ``overrides`` that do not parse.
        CollectFailed: for options or an input folder the run cannot take, a rank that failed, a run that
            timed out or was interrupted.
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
