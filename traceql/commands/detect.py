"""`traceql detect`: exact overlap, baselines and slowdown labels for every compute kernel of a trace."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from traceql.errors import TraceqlError
from traceql.export.files import format_for, sink_parquet, write_frame, write_frames
from traceql.labelling import memo
from traceql.labelling.inputs import Baseline, read_metrics
from traceql.labelling.options import PAIRED_FACTOR, TOP
from traceql.labelling.request import Request, listed, request
from traceql.labelling.result import DetectResult, StoredRows, merge
from traceql.parallel import Pool, Progress, check, disk_bytes
from traceql.sources.shards import shards
from traceql.verdicts.pricing import price_run, price_stored

if TYPE_CHECKING:
    from traceql.analyzers.detection.detector import SlowdownDetector

__all__ = ["DetectResult", "detect"]


@dataclass(frozen=True)
class Labelling:
    """What every run of one `detect` is labelled with (read once, sent once to each worker)."""

    request: Request
    baseline: Baseline | None
    top: int
    detector: SlowdownDetector | None
    metrics: pl.DataFrame | None
    causes: bool = True  # whether each run is replayed for its causes and critical path


def label_run(item: tuple[int, list[Path] | None], how: Labelling) -> DetectResult:
    """One run (its place, its inputs): its timeline read whole, labelled, and what its cases cost on the
    critical path (a task of :class:`traceql.parallel.Pool`).

    Args:
        item: the run's place among the runs and its inputs (one of :meth:`Request.runs`; None: the embedded
            example).
        how: what every run is labelled with: the request, baseline, ``top``, detector, metrics, and whether its
            causes are priced.

    Returns:
        The run's labels, with what its cases cost on the critical path where ``how.causes`` asks for it.
    """
    timeline, result = how.request.label(item[1], how.baseline, top=how.top, detector=how.detector,
                                         metrics=how.metrics)
    return price_run(result, timeline) if how.causes else result


def _run_name(paths: list[Path] | None) -> str:
    return ", ".join(map(str, paths)) if paths else "the embedded example"


def detect(
    paths: str | Path | Sequence[str | Path] | None = None,
    *,
    baseline: Sequence[str | Path] | None = None,
    threshold: float = PAIRED_FACTOR,
    top: int = TOP,
    detector: SlowdownDetector | None = None,
    hta_compat: bool = False,
    metrics: Sequence[str | Path] | None = None,
    single_trace: bool = False,
    out: str | Path | None = None,
    workers: int = 1,
    scheduler: str | None = None,
    progress: Progress | None = None,
    causes: bool = True,
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

    Runs given together (``traceql.sources.runs``) are each labelled on their own, then merged: in ``workers``
    local processes, or on the Dask scheduler at ``scheduler``, when asked (``traceql.parallel``);
    ``progress(done, total, run)`` follows them. A run of several rank files is labelled a rank at a time
    (``traceql.labelling.by_rank``: one rank's kernels in memory at once, the ranks spread over the workers);
    its rows are then stored on disk (:class:`StoredRows`) and read when asked for. Each run is replayed for
    its causes and what its cases cost on the critical path (``traceql.verdicts.pricing``), unless ``causes``
    is off (a large run's replay is most of its time and memory). The result is kept in the cache folder and
    served to the same call on the same unchanged files (``traceql.labelling.memo``; not with a ``detector``
    of the caller's; ``TRACEQL_NO_RESULT_CACHE=1`` computes every time).

    Args:
        paths: the trace files or folders (none: the embedded example).
        baseline: isolated runs of the same model and shapes (one GPU, no DDP) to label against; with neither
            this nor ``paths``, the embedded example's isolated run.
        threshold: a case is an overlapped kernel at least this many times its baseline (above 1.0).
        top: how many slowed signatures to list (``top_signatures``).
        detector: the detector that labels runs with no reference (a :class:`SlowdownDetector`, or any
            estimator with its ``fit``/``predict``); None: the shipped one at ``threshold``.
        hta_compat: compute the per-rank breakdown as Holistic Trace Analysis 0.5.0 does; labels are unchanged.
        metrics: Nsight Compute CSVs of the same workload, whose ``ncu_*`` metrics join every compute kernel.
        single_trace: label by the detector even where the trace has isolated steps (they are hidden from it).
        out: a ``.parquet``, ``.csv`` or ``.json`` file (the suffix picks the format) to write one row per
            compute kernel to; not an input.
        workers: how many local processes label the runs (and a run's ranks); 1: one after another, here.
        scheduler: the address of a Dask scheduler (``tcp://host:8786``) whose workers label them instead.
        progress: called as ``progress(done, total, run)`` as the runs (or a run's ranks) are labelled.
        causes: replay each run for its causes and critical path (off: the same labels, faster and lighter).

    Returns:
        The labels of every compute kernel, the per-rank and per-step breakdown, the top slowed signatures, the
        causes and critical path, and notes; runs given together merged into one.

    Raises:
        OptionError: for a bad ``threshold``, ``out`` or ``workers``, or ``workers`` and ``scheduler`` both given.
        InputError: for inputs that cannot be read as traces, baselines or metrics.
    """
    check(workers, scheduler)
    out_format = format_for(out) if out is not None else None
    req = request(paths, baseline=baseline, threshold=threshold, single_trace=single_trace, hta_compat=hta_compat,
                  outputs={"--out": out}, also=metrics or ())
    ncu = read_metrics(metrics) if metrics else None
    options = {"threshold": threshold, "top": top, "hta_compat": hta_compat, "single_trace": single_trace,
               "causes": causes}
    kept = memo.key("detect", [*req.inputs(), *listed(metrics)], options) if detector is None else None
    result = memo.load(kept)
    if not isinstance(result, DetectResult):
        result = _labelled(Labelling(req, req.read_baseline(), top, detector, ncu, causes), workers, scheduler,
                           progress)
        memo.save(kept, result, f"detect: {_run_name(req.paths)}")
    if out is not None and out_format is not None:  # one is None only where the other is
        write_rows(result, Path(out), out_format)
    return result


def _labelled(how: Labelling, workers: int, scheduler: str | None, progress: Progress | None) -> DetectResult:
    """Every run of ``how.request`` labelled (in ``workers`` processes or on ``scheduler``) and merged."""
    req, top = how.request, how.top
    runs = req.runs()
    results: list[DetectResult | None] = [None] * len(runs)
    with Pool(workers, scheduler) as pool:
        # a run of several rank files is labelled a rank at a time (its Nsight Compute metrics join the whole run)
        split = {i: parts for i, run in enumerate(runs)
                 if how.metrics is None and (parts := shards(run, pool=pool)) and len(parts) > 1}
        whole = [(i, run) for i, run in enumerate(runs) if i not in split]
        for (i, _), res in pool.map(label_run, whole, common=how, name=lambda item: _run_name(item[1]),
                                    progress=progress if not split else None, cost=lambda item: disk_bytes(item[1])):
            if isinstance(res, TraceqlError):
                raise res  # the first run that failed, in the order given: the others are cancelled
            results[i] = res
        for i, parts in split.items():
            results[i] = req.label_by_rank(parts, how.baseline, pool=pool, top=top, detector=how.detector,
                                           progress=progress, then=price_stored if how.causes else None)
    result = merge([r for r in results if r is not None], top=top)
    result.notes = list(dict.fromkeys([*req.notes(), *result.notes]))
    return result


def write_rows(result: DetectResult, path: Path, fmt: str) -> None:
    """The result's rows to ``path``: at once, or a rank at a time where they were stored that way (parquet:
    streamed from the stored files).

    Args:
        result: what :func:`detect` returned.
        path: the file to write (atomically).
        fmt: its format: ``parquet``, ``csv`` or ``json``.
    """
    if isinstance(result.rows, StoredRows) and fmt == "parquet":
        sink_parquet(result.rows.scan(), path)
    elif isinstance(result.rows, StoredRows):
        write_frames(result.rows.parts(), path, fmt)
    else:
        write_frame(result.rows, path, fmt)
