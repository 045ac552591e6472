"""The request every labelling command builds once: what to label (the inputs, or the embedded example and
its isolated run), against what (the baselines), how (threshold, single-trace, HTA's breakdown); the user's
options checked and the outputs refused where they are inputs, before anything is read."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from traceql.analyzers.replay.compiled import COMPILED_NODES
from traceql.analyzers.replay.warm import warm
from traceql.labelling import options, reused
from traceql.labelling.by_rank import Settings, label_by_rank, mapper, scratch
from traceql.labelling.inputs import Baseline, Timeline, profiler_notes, read_baseline, read_timeline
from traceql.labelling.kept import Then
from traceql.labelling.label import import_detector, label
from traceql.labelling.options import PAIRED_FACTOR, TOP
from traceql.labelling.result import DetectResult
from traceql.parallel import Pool, Progress
from traceql.sources import inputs
from traceql.sources.outputs import check_file_output
from traceql.sources.runs import input_notes, split_runs
from traceql.sources.shards import Shard

Paths = str | Path | Sequence[str | Path] | None


def listed(paths: Paths) -> list[Path]:
    """The paths a caller gave (one, several or none) as a list."""
    if paths is None:
        return []
    return [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]


@dataclass(frozen=True)
class Request:
    """What to label and how. ``paths`` None: the embedded example (then ``baseline`` is its isolated run,
    unless the caller gave one)."""

    paths: list[Path] | None
    baseline: list[Path] | None
    threshold: float = PAIRED_FACTOR
    single_trace: bool = False
    hta_compat: bool = False

    def traces(self) -> list[Path]:
        """The traces' files or folders: those given, else the embedded example."""
        return self.paths or [inputs.DEFAULT_TRACE]

    def inputs(self) -> list[Path]:
        """Every input file or folder: the traces and the baselines."""
        return [*self.traces(), *(self.baseline or [])]

    def runs(self) -> list[list[Path] | None]:
        """The inputs of each run, in the order given (``traceql.sources.runs``)."""
        return split_runs(self.paths)

    def notes(self) -> list[str]:
        """What the inputs themselves call for saying (``traceql.sources.runs.input_notes``), and the profiler's
        cost to each run's steps where it recorded its untraced steps and they differ (``inputs.profiler_notes``)."""
        return [*input_notes(self.paths), *profiler_notes(self.runs())]

    def read_baseline(self) -> Baseline | None:
        """The isolated runs given, read once (None without)."""
        return read_baseline(self.baseline) if self.baseline else None

    def label(self, paths: list[Path] | None, baseline: Baseline | None, **more: Any) -> tuple[Timeline, DetectResult]:
        """One run's timeline (``paths``: one of :meth:`runs`), read and labelled against ``baseline``;
        ``more``: :func:`traceql.labelling.label.label`'s other options (top, detector, metrics)."""
        import_detector()
        timeline = read_timeline(paths)
        return timeline, label(timeline, baseline=baseline, threshold=self.threshold, hta_compat=self.hta_compat,
                               single_trace=self.single_trace, **more)

    def label_by_rank(self, shards: list[Shard], baseline: Baseline | None, *, pool: Pool | None = None,
                      top: int = TOP, detector: Any = None, progress: Progress | None = None,
                      then: Then | None = None) -> DetectResult:
        """One run's ``shards`` (``traceql.sources.shards``) labelled a rank at a time on ``pool`` (None: here, one
        after another; ``traceql.labelling.by_rank``), against ``baseline``; its working files in a scratch folder
        of its own; ``then``: what follows the labels while the run's activities are stored
        (``by_rank.label_by_rank``). With ``then`` (and no ``detector`` of the caller's), the labels are kept in the
        cache, and labels kept there by an earlier command are given to ``then`` instead (``reused``)."""
        k = None
        if then is not None and detector is None:  # labels kept for the next command's replay (``reused``)
            asked = {"threshold": self.threshold, "single_trace": self.single_trace, "hta_compat": self.hta_compat,
                     "top": top}
            k = reused.key(shards, self.baseline or [], asked)
        with nullcontext(pool) if pool is not None else Pool(1) as used:
            got = reused.found(k)
            if got is not None and then is not None:
                if sum(n for _, _, n in got.kept.stored.index) >= COMPILED_NODES:  # its passes loaded meanwhile
                    warm()
                then(got.result, replace(got.kept, mapper=mapper(used), key=k))
                return got.result
            import_detector()
            with scratch() as folder:  # the labels' working files (none where they are served)
                how = Settings(baseline, self.threshold, self.single_trace, self.hta_compat, Path(folder),
                               then is not None)
                if then is not None:
                    then = reused.keeping(k, then, reused.source(shards))
                return label_by_rank(shards, how, pool=used, top=top, detector=detector, progress=progress,
                                     then=then)

    def label_all(self) -> tuple[Timeline, DetectResult]:
        """Every input as one timeline (what a report or a Chrome trace draws), labelled."""
        baseline = self.read_baseline()
        return self.label(self.paths, baseline)


def request(paths: Paths = None, *, baseline: Paths = None, threshold: float = PAIRED_FACTOR,
            single_trace: bool = False, hta_compat: bool = False,
            outputs: Mapping[str, str | Path | None] | None = None, also: Sequence[str | Path] = ()) -> Request:
    """The request of a labelling command: with neither paths nor baseline, the embedded example against its
    isolated run. ``threshold`` is checked; each of ``outputs`` (option → path) goes through the one output
    check (``traceql.sources.outputs``): never an input (the traces, baselines and ``also``: other input files
    such as Nsight Compute CSVs), nor inside one, nor a link or a device."""
    given, base = listed(paths), listed(baseline)
    if not given and not base:
        base = [inputs.DEFAULT_BASELINE]
    options.threshold(threshold)
    req = Request(given or None, base or None, threshold, single_trace, hta_compat)
    for option, output in (outputs or {}).items():
        if output is not None:
            check_file_output(output, option, [*req.inputs(), *also])
    return req
