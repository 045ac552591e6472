"""`traceql export perfetto`: a trace's timeline as Chrome trace JSON, with detect's slowdown cases marked."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from traceql.export import perfetto as chrome
from traceql.labelling.options import PAIRED_FACTOR
from traceql.labelling.request import request
from traceql.version import __version__

__all__ = ["PerfettoResult", "perfetto"]


@dataclass
class PerfettoResult:
    """What `export perfetto` wrote: the file, its events by kind (``cat``, and ``metadata``), the cases."""

    path: Path
    events: dict[str, int]
    cases: int
    mode: str
    notes: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.events.values())


def perfetto(
    paths: str | Path | Sequence[str | Path] | None = None,
    *,
    output: str | Path,
    baseline: Sequence[str | Path] | None = None,
    threshold: float = PAIRED_FACTOR,
    single_trace: bool = False,
) -> PerfettoResult:
    """Write a trace's kernels, memory operations and steps as Chrome trace JSON to ``output`` (``.json`` or
    ``.json.gz``), the compute kernels that `detect` labels slowed by communication marked as ``slowdown``.

    Labels as :func:`traceql.commands.detect.detect` makes them, from the same options; with neither paths
    nor baseline, the embedded example trace against its isolated baseline.

    Args:
        paths: the trace files or folders (none: the embedded example).
        output: the Chrome trace JSON to write: ``.json``, or ``.json.gz`` to gzip it; not an input.
        baseline: isolated runs of the same model and shapes to label against (as ``detect``'s).
        threshold: a case is an overlapped kernel at least this many times its baseline (above 1.0).
        single_trace: label by the detector even where the trace has isolated steps.

    Returns:
        The file written, its events by kind, the cases marked, the label source and notes.

    Raises:
        OptionError: for an ``output`` of another suffix, or one that is an input, or a bad ``threshold``.
    """
    output = chrome.check_output(Path(output))
    req = request(paths, baseline=baseline, threshold=threshold, single_trace=single_trace,
                  outputs={"--output": output})
    timeline, result = req.label_all()
    kernels, memops = timeline.kernels, timeline.memops
    pids = chrome.processes(timeline.ranks, kernels, memops)
    rows = [*chrome.kernel_rows(kernels, result.kernels, pids), *chrome.memop_rows(memops, pids),
            *chrome.step_rows(kernels, memops, pids, chrome.steps_tid(kernels, memops))]
    meta = chrome.metadata(pids, rows)
    cases = int(result.kernels["is_slowdown"].sum())
    other = {"traceql_version": __version__, "label_source": result.mode, "threshold": threshold,
             "baseline_match_rate": result.match_rate, "cases": cases,
             "inputs": [str(p) for p in req.traces()],
             "baseline": [str(p) for p in req.baseline or []]}
    chrome.write_trace(output, meta, rows, other)
    return PerfettoResult(output, {**chrome.counts(rows), "metadata": len(meta)}, cases, result.mode, result.notes)
