"""`traceql detect`: exact overlap, baselines and slowdown labels for every compute kernel of a trace."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from analyzers.detection.detector import SlowdownDetector
from analyzers.detection.labels import PAIRED_FACTOR
from traceql.commands import options
from traceql.export.files import format_for, write_frame
from traceql.labelling import DetectResult, label, read_baseline, read_metrics, read_timeline
from traceql.sources import inputs

__all__ = ["DetectResult", "detect"]


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
) -> DetectResult:
    """Label every compute kernel of a trace as slowed by communication or not.

    With ``baseline`` (isolated runs of the same model and shapes), labels follow the paired definition:
    overlapped and longer than ``threshold`` × the signature's isolated median. Without it, a
    :class:`SlowdownDetector` labels from the trace alone. With neither paths nor baseline, the embedded
    example trace and its isolated baseline. ``hta_compat`` computes the per-rank breakdown as Holistic
    Trace Analysis 0.5.0 does (``analyzers.compat``); labels stay exact. ``metrics`` (ncu CSVs of the same
    workload) adds the ``ncu_*`` metrics to every compute kernel (``analyzers.metrics``). Without a
    baseline, a trace with isolated steps (``step_<i>_nosync``) is labelled against them, unless
    ``single_trace`` hides them and asks the detector. ``out`` (``.parquet``, ``.csv`` or ``.json``) gets
    one row per compute kernel, written atomically; it may not be an input.
    """
    if paths is None or (not isinstance(paths, (str, Path)) and len(paths) == 0):
        paths = None
        if baseline is None:
            baseline = [inputs.DEFAULT_BASELINE]
    options.threshold(threshold)
    out_format = format_for(out) if out is not None else None
    if out is not None:
        options.not_an_input(out, [*([paths] if isinstance(paths, (str, Path)) else paths or []),
                                   *(baseline or []), *(metrics or [])], "--out")
    ncu = read_metrics(metrics) if metrics else None
    timeline = read_timeline(paths)
    iso = read_baseline(baseline) if baseline and not timeline.signatures().is_empty() else None
    result = label(timeline, baseline=iso, threshold=threshold, top=top, detector=detector, hta_compat=hta_compat,
                   metrics=ncu, single_trace=single_trace)
    if out is not None:
        write_frame(result.kernels, Path(out), out_format)
    return result
