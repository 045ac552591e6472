"""A run labelled a rank at a time: only one rank's kernels are in memory at once, whatever the run's size, and
the ranks are read and labelled in parallel where asked (``traceql.parallel.Pool``).

Every figure that spans ranks is made in parts (``traceql.analyzers``): each shard of the run (a rank's
file, ``traceql.sources.shards``) gives its part, the parts are put together, and the next pass reads the
shards again with the whole run's figure. The passes:

1. **read**: the shard's kernels read, their overlap computed; its per-rank breakdown and step spans, and the
   parts of the run's figures: DDP's copy names, the clock's first timestamps, step bags (which ranks are
   replicas), step sequences (the canonical step). Its compute kernels go to the scratch folder.
2. **place**: each kernel's position in its replicas' canonical step; the narrow rows the position and key
   statistics are made from (every compute kernel's duration and overlap), stored by the bucket their group
   hashes to.
3. **statistics**: the medians, minimums and corrections of the groups of one bucket, from every shard's rows
   of it (a task a bucket: no one process holds the run's rows).
4. **features**: the detector's features from those statistics; the rows it judges, which it is fitted on.
5. **label**: scored by the fitted detector and labelled as the run's label source says; the rows are stored
   (parquet, a file a rank) and summed up (per rank, per step, by signature).

What the run gives equals what :func:`traceql.labelling.label.label` gives it read whole (a test holds them
equal on the shipped runs). The scratch folder (``TRACEQL_SCRATCH``, else the system's temporary folder) must
be one that every worker sees: on a cluster, a shared file system.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from traceql.analyzers.baselines.learned import chosen, empty
from traceql.analyzers.baselines.physical import ticks
from traceql.analyzers.baselines.replicas import groups
from traceql.analyzers.baselines.sequences import alignments, canonical_steps
from traceql.analyzers.baselines.within_trace import GROUPS
from traceql.analyzers.cases import rank_totals, top_of
from traceql.analyzers.detection.ddp import edge_names
from traceql.analyzers.partial import partial_notes
from traceql.analyzers.replay.stored import Stored
from traceql.analyzers.replay.windows import Mapper
from traceql.analyzers.reports import step_totals
from traceql.errors import InputError, TraceqlError
from traceql.labelling.core import baseline_notes, detector_for, no_kernels
from traceql.labelling.judged import detector_matrix, sampled_rows
from traceql.labelling.kept import Kept, Then
from traceql.labelling.modes import LabelSource, choose, factor_notes
from traceql.labelling.options import TOP
from traceql.labelling.passes import (
    Labelled,
    Read,
    Run,
    Settings,
    features,
    label,
    ordered_rows,
    place,
    read,
    statistics,
)
from traceql.labelling.result import DetectResult, StoredRows, summary_of, summed_kinds
from traceql.model import schema
from traceql.parallel import Pool, Progress
from traceql.sources.shards import Shard, at_once

SCRATCH_ENV = "TRACEQL_SCRATCH"
__all__ = ["SCRATCH_ENV", "Settings", "Then", "label_by_rank", "mapper", "scratch"]


def scratch(prefix: str = "traceql-ranks-") -> tempfile.TemporaryDirectory:
    """A scratch folder for one run's working files (``$TRACEQL_SCRATCH``, else the temporary folder)."""
    where = os.environ.get(SCRATCH_ENV) or None
    if where is not None and not Path(where).is_dir():
        raise InputError(f"${SCRATCH_ENV} is not a folder (the scratch folder every worker sees)", path=where)
    return tempfile.TemporaryDirectory(prefix=prefix, dir=where)


class _Discard:
    """Working files removed in threads of their own while the passes go on (removing a large file can take as
    long as writing it where the file system passes each freed block on to its disk: ``discard``);
    :meth:`wait` returns once every file given is gone."""

    def __init__(self) -> None:
        self._thread = ThreadPoolExecutor(max_workers=4, thread_name_prefix="traceql-discard")
        self._pending: list[Any] = []

    def __call__(self, paths: Iterable[Path]) -> None:
        self._pending += [self._thread.submit(_unlink, p) for p in paths]

    def wait(self) -> None:
        for done in self._pending:
            done.result()
        self._pending.clear()
        self._thread.shutdown()


def _unlink(path: Path) -> None:
    with suppress(FileNotFoundError):
        path.unlink()


def mapper(pool: Pool) -> Mapper | None:
    """A ``replay.Mapper`` that replays a run's windows of steps on ``pool`` (a failed one stops the run); None
    for a pool that runs its tasks here: the replay's own (windows on threads of this process)."""
    if pool.serial:
        return None

    def windows(fn: Callable[[Any, Any], Any], items: list[Any], job: Any) -> Iterable[Any]:
        for _, result in pool.map(fn, items, common=job, name=lambda w: f"{w.run_id} steps {w.first}-{w.last}"):
            if isinstance(result, TraceqlError):
                raise result
            yield result
    return windows


class _Passes:
    """The passes of one run over its shards, on a pool; a failed shard stops the run with its error."""

    def __init__(self, shards: list[Shard], pool: Pool, progress: Progress | None) -> None:
        self.items = list(enumerate(shards))
        self.pool, self.progress = pool, progress
        self.total = 5 * len(shards)
        self.done = 0
        self.at_once = at_once(shards)

    def run(self, fn: Callable[[tuple[int, Shard], Any], Any], common: Any) -> list[Any]:
        out = []

        def tick(_done: int, _total: int | None, name: str) -> None:
            self.done += 1
            if self.progress:
                self.progress(self.done, self.total, name)

        for _, result in self.pool.map(fn, self.items, common=common, name=lambda it: it[1].name, progress=tick,
                                       cost=lambda it: it[1].size(), at_once=self.at_once):
            if isinstance(result, TraceqlError):
                raise result
            out.append(result)
        return out


def _frame(parts: Sequence[pl.DataFrame | None]) -> pl.DataFrame:
    given = [p for p in parts if p is not None]
    return pl.concat(given, how="diagonal_relaxed") if given else pl.DataFrame()


def _fit(run: Run, counts: list[int], detector: Any, inputs: Callable[[], np.ndarray], discard: _Discard) -> Any:
    """The detector fitted on the judged rows of the run, in the run's order (on all its kernels where too few
    are judged, as the whole run read at once is): only the rows it samples are read."""
    from traceql.analyzers.detection.detector import MIN_FIT

    paths = [run.settings.path(i, "judged.arrow") for i in range(len(counts))]
    total = sum(counts)
    fit_rows = getattr(detector, "fit_rows", None)  # a detector of the user's own may sample as it likes
    sample = fit_rows(total) if fit_rows is not None and total >= MIN_FIT else None
    if total < MIN_FIT:
        judged = inputs()
    elif sample is None:
        judged = detector_matrix([pl.read_ipc(p) for p in paths], run.windowed)
    else:
        judged = sampled_rows(paths, counts, sample, run.windowed)
    discard(paths)
    detector.fit(judged)
    return detector


def label_by_rank(shards: list[Shard], settings: Settings, *, pool: Pool, top: int = TOP, detector: Any = None,
                  progress: Progress | None = None, then: Then | None = None) -> DetectResult:
    """One run's shards labelled a rank at a time (the passes above), on ``pool``; the result holds its rows
    on disk (:class:`StoredRows`), in a folder that lives as long as the result. With ``then`` (and
    ``settings.replay``), what comes next while the run's activities are still stored: ``then(result, kept)``
    (``labelling.kept``: its ``mapper`` replays windows of them on the pool). Every working file is gone when it
    returns."""
    discard = _Discard()
    try:
        return _passes(shards, settings, pool, top, detector, progress, discard, then)
    finally:
        discard.wait()


def _passes(shards: list[Shard], settings: Settings, pool: Pool, top: int, detector: Any,
            progress: Progress | None, discard: _Discard, then: Then | None) -> DetectResult:
    passes = _Passes(shards, pool, progress)
    firsts: list[Read] = passes.run(read, settings)
    notes = [n for r in firsts for n in r.notes]
    notes += partial_notes(_frame([r.comm_devices for r in firsts]), _frame([r.ranks for r in firsts]))  # all shards
    if not any(r.compute for r in firsts):
        return no_kernels(_frame([r.ranks for r in firsts]), any(r.metrics for r in firsts), shards[0].name)
    if not any(r.comm for r in firsts):
        runs = ", ".join(dict.fromkeys(run for r in firsts for run in r.runs))
        notes.append(f"note: {runs}: no communication kernels: nothing overlaps, so no slowdown cases")
    seen = _frame([r.seen for r in firsts])
    bags = [r.bags for r in firsts if r.bags is not None]
    replicas = groups(seen, _frame([b[0] for b in bags]), _frame([b[1] for b in bags])) if seen.height else \
        seen.with_columns(pl.lit(None, pl.Int32).alias("replica"))
    canonical = canonical_steps([s for r in firsts for s in r.sequences], replicas)
    copies = pl.concat([_frame([r.copies for r in firsts]), edge_names(_frame([r.edges for r in firsts]))],
                       how="vertical_relaxed").unique(maintain_order=True)
    windowed = any(s.windowed for s in shards)
    run = Run(settings, copies, ticks(_frame([r.ticks for r in firsts])), replicas, canonical,
              [alignments(r.sequences, replicas, canonical) for r in firsts], windowed,
              reference=tuple(i for i, r in enumerate(firsts) if r.reference) if windowed else None,
              buckets=len(shards))
    run = replace(run, offsets=passes.run(place, run))
    stats, keys = zip(*passes.run(statistics, run), strict=True)
    discard(settings.path(i, f"{name}.arrow") for i in range(len(shards)) for name in GROUPS)
    detector = detector_for(settings.threshold, detector)
    run = replace(run, stats=pl.concat(stats), keys=pl.concat(keys), offsets=None,
                  factors=chosen(getattr(detector, "estimate_factors", None), [g for r in firsts for g in r.gpus]))
    counts, used = zip(*passes.run(features, run), strict=True) if shards else ((), ())
    discard(settings.path(i, "placed.arrow") for i in range(len(shards)))

    def every_row() -> np.ndarray:  # too few judged rows: fitted on all, as the whole run would be
        return detector_matrix([ordered_rows(i, run, pl.read_ipc(settings.path(i, "features.arrow")))
                        for i in range(len(shards))], run.windowed)

    isolated = sorted({r for f in firsts for r in f.isolated_runs})
    source = choose(has_baseline=settings.baseline is not None, has_isolated_steps=any(f.isolated for f in firsts),
                    single_trace=settings.single_trace)
    run = replace(run, detector=_fit(run, list(counts), detector, every_row, discard), source=source,
                  inrun_runs=pl.Series("run_id", isolated, dtype=pl.String))
    labelled: list[Labelled] = passes.run(label, run)
    discard(settings.path(i, f"{name}.arrow") for i in range(len(shards)) for name in ("kernels", "extra", "features"))
    discard(settings.path(i, "reference.arrow") for i in run.reference or ())
    rate = None
    if settings.baseline is not None:
        compute = sum(r.compute for r in firsts)
        rate = sum(r.matched for r in firsts) / compute if compute else 0.0
        notes += baseline_notes(rate, settings.baseline)
    notes += factor_notes(run.factors if run.factors is not None else empty(), source, any(used))
    result = _result(shards, settings, firsts, labelled, source, rate, notes, top)
    files = [(settings.path(i, "activities.arrow"), r.index) for i, r in enumerate(firsts) if r.activities is not None]
    stored = [path for path, _ in files]
    if then is not None and stored:  # every rank's activities, replayed a window of steps at a time over the workers
        waits = [r.waits for r in firsts if r.waits is not None]
        late = [r.late for r in firsts if r.late is not None]
        broken = [r.breakdown_steps for r in firsts if r.breakdown_steps is not None]
        then(result, Kept(Stored(tuple(stored), tuple(index for _, index in files)),
                          pl.concat(waits) if waits else None, mapper(pool), pl.concat(late) if late else None,
                          pl.concat(broken) if broken else None, _frame([r.ranks for r in firsts]).unique(
                              maintain_order=True), [g for r in firsts for g in r.gpus],
                          {c for r in firsts for c in r.collectives}, [str(f.path) for s in shards for f in s.files]))
    discard(stored)
    return result


def _result(shards: list[Shard], settings: Settings, firsts: list[Read], labelled: list[Labelled],
            source: LabelSource, rate: float | None, notes: list[str], top: int) -> DetectResult:
    steps = schema.conform(step_totals(_frame([r.spans for r in firsts]), _frame([r.steps for r in labelled])),
                           schema.STEP_COST)
    tops = schema.conform(top_of(_frame([r.case_rows for r in labelled]), _frame([r.instances for r in labelled]),
                                 top), schema.TOP_SIGNATURES)
    cases = rank_totals(_frame([r.cases for r in labelled]))  # a rank's windows add up
    ranks = summary_of(_frame([r.breakdown for r in firsts]), cases, steps)
    holder = tempfile.TemporaryDirectory(prefix="traceql-rows-", dir=settings.folder.parent)
    files = []
    for i in range(len(shards)):
        files.append(Path(holder.name) / f"rank{i}.parquet")
        shutil.move(settings.path(i, "labels.parquet"), files[-1])
    baseline, reference = summed_kinds([(r.baseline_kinds, r.reference_kinds) for r in labelled])
    stored = StoredRows(tuple(files), sum(r.kernels for r in labelled), sum(r.case_rows.height for r in labelled),
                        baseline, reference, holder=holder)
    mode = source.mode
    isolated = {run_id for f in firsts for run_id in f.isolated_runs}
    if source is LabelSource.INRUN and not {run_id for f in firsts for run_id in f.runs} <= isolated:
        mode = LabelSource.MIXED.mode  # a run without isolated steps came with others: the detector labels it
    return DetectResult(ranks=ranks, top_signatures=tops, rows=stored, mode=mode, match_rate=rate,
                        notes=list(dict.fromkeys(notes)), steps=steps)

