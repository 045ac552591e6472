"""`traceql detect`: exact overlap, baselines and slowdown labels for every compute kernel of a trace."""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from traceql.analyzers.detection.labels import PAIRED_FACTOR
from traceql.commands import options
from traceql.errors import TraceqlError
from traceql.export.files import format_for, write_frame
from traceql.labelling import Baseline, DetectResult, label, read_baseline, read_metrics, read_timeline
from traceql.merge import merge
from traceql.parallel import Progress, check, disk_bytes, iter_tasks
from traceql.sources import inputs
from traceql.sources.runs import split_runs

if TYPE_CHECKING:
    from traceql.analyzers.detection.detector import SlowdownDetector

__all__ = ["DetectResult", "detect"]


@dataclass(frozen=True)
class Labelling:
    """What every run of one `detect` is labelled with (read once, sent once to each worker)."""

    baseline: Baseline | None
    threshold: float
    top: int
    detector: SlowdownDetector | None
    hta_compat: bool
    metrics: pl.DataFrame | None
    single_trace: bool


def import_detector() -> None:
    """Import the detector (scikit-learn: over a second) in a background thread: it runs while DuckDB reads
    the trace, which holds no Python lock; :func:`label` imports it then at no cost (or waits for it)."""
    if "traceql.analyzers.detection.detector" not in sys.modules:
        threading.Thread(target=importlib.import_module, args=("traceql.analyzers.detection.detector",), daemon=True,
                         name="import-detector").start()


def label_run(paths: list[Path] | None, how: Labelling) -> DetectResult:
    """One run: its timeline read, labelled (a task of :func:`traceql.parallel.iter_tasks`)."""
    import_detector()
    timeline = read_timeline(paths)
    iso = how.baseline if not timeline.signatures().is_empty() else None
    return label(timeline, baseline=iso, threshold=how.threshold, top=how.top, detector=how.detector,
                 hta_compat=how.hta_compat, metrics=how.metrics, single_trace=how.single_trace)


def _run_name(paths: list[Path] | None) -> str:
    return ", ".join(map(str, paths)) if paths else "the embedded example"


def detect(
    paths: str | Path | Sequence[str | Path] | None = None,
    *,
    baseline: Sequence[str | Path] | None = None,
    threshold: float = PAIRED_FACTOR,
    top: int = 10,
    detector: SlowdownDetector | None = None,
    hta_compat: bool = False,
    metrics: Sequence[str | Path] | None = None,
    single_trace: bool = False,
    out: str | Path | None = None,
    workers: int = 1,
    scheduler: str | None = None,
    progress: Progress | None = None,
) -> DetectResult:
    """Label every compute kernel of a trace as slowed by communication or not.

    With ``baseline`` (isolated runs of the same model and shapes), labels follow the paired definition:
    overlapped and longer than ``threshold`` × the signature's isolated median. Without it, a
    :class:`SlowdownDetector` labels from the trace alone. With neither paths nor baseline, the embedded
    example trace and its isolated baseline. ``hta_compat`` computes the per-rank breakdown as Holistic
    Trace Analysis 0.5.0 does (``traceql.analyzers.compat``); labels stay exact. ``metrics`` (ncu CSVs of the same
    workload) adds the ``ncu_*`` metrics to every compute kernel (``traceql.analyzers.metrics``). Without a
    baseline, a trace with isolated steps (``step_<i>_nosync``) is labelled against them, unless
    ``single_trace`` hides them and asks the detector. ``out`` (``.parquet``, ``.csv`` or ``.json``) gets
    one row per compute kernel, written atomically; it may not be an input.

    Runs given together (``traceql.merge``) are each labelled on their own, then merged: in ``workers``
    local processes, or on the Dask scheduler at ``scheduler``, when asked (``traceql.parallel``);
    ``progress(done, total, run)`` follows them.
    """
    if paths is None or (not isinstance(paths, (str, Path)) and len(paths) == 0):
        paths = None
        if baseline is None:
            baseline = [inputs.DEFAULT_BASELINE]
    options.threshold(threshold)
    check(workers, scheduler)
    out_format = format_for(out) if out is not None else None
    if out is not None:
        options.not_an_input(out, [*([paths] if isinstance(paths, (str, Path)) else paths or []),
                                   *(baseline or []), *(metrics or [])], "--out")
    ncu = read_metrics(metrics) if metrics else None
    runs = split_runs(paths)
    how = Labelling(read_baseline(baseline) if baseline else None, threshold, top, detector, hta_compat, ncu,
                    single_trace)
    results = []
    with closing(iter_tasks(label_run, runs, common=how, workers=workers, scheduler=scheduler, name=_run_name,
                            progress=progress, cost=disk_bytes)) as labelled:
        for _, res in labelled:
            if isinstance(res, TraceqlError):
                raise res  # the first run that failed, in the order given: the others are cancelled
            results.append(res)
    result = merge(results, top=top)
    if out is not None:
        write_frame(result.kernels, Path(out), out_format)
    return result
