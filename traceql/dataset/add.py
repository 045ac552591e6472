"""Label one run folder or trace and add its rows to a dataset; pair it with the isolated run it matches.

Each trace and each baseline is read once: the baselines where the work is shared out (and sent to every
worker), and the timeline read to choose the baseline is the one labelled. Labelling writes nothing; the
labelled entries are recorded one by one, in the order given, under the dataset's lock.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import polars as pl

from traceql.dataset.entries import Outcome, content_id
from traceql.dataset.store import Dataset
from traceql.dataset.summary import training_rows
from traceql.errors import OptionError, TraceqlError
from traceql.labelling.inputs import Baseline, Timeline, read_baseline, read_timeline
from traceql.labelling.label import label
from traceql.model import schema
from traceql.parallel import Progress, disk_bytes, iter_tasks
from traceql.sources import inputs, runfolder

MIN_MATCH = 0.5
RUN_KEYS = ("world_size", "cap_size", "batchsize", "epochs")


def describe(path: Path, model: str | None, config: str | None) -> tuple[str, str, dict[str, Any]]:
    """Model, configuration and provenance of an input: from a run folder's manifest, else the options."""
    m = runfolder.read_manifest(path)
    if m is None:
        return model or path.name.split(".")[0], config or "trace", {"source": "trace"}
    local = m["input"]["local_config"]
    cfg = f"ws{local['world_size']}_cap{local['cap_size']}_bs{local['batchsize']}"
    info = {"source": "run", "run_name": m.get("run_name"), "profiler": m["profiler"]["name"],
            "profiler_version": m["profiler"].get("version"), "environment": m.get("environment"),
            "device": m.get("device"), **{k: local[k] for k in RUN_KEYS}}
    return model or Path(m["input"]["path"]).name, config or cfg, info


class BaselinePicker:
    """The isolated runs to choose from, each read once (where the work is shared out: then sent to every
    worker); chooses, for each timeline, the one whose kernel signatures it matches best. A baseline that
    cannot be read fails the sources that need a choice, as it would fail them one by one."""

    def __init__(self, paths: Sequence[str | Path]) -> None:
        self.paths = [Path(p) for p in paths]
        self.baselines: list[Baseline] = []
        self.error: TraceqlError | None = None
        for path in self.paths:
            try:
                self.baselines.append(read_baseline(path))
            except TraceqlError as exc:
                self.error = exc
                break

    def pick(self, timeline: Timeline) -> tuple[Path | None, Baseline | None, float]:
        """The best-matching baseline (its path, itself, its match rate); None below :data:`MIN_MATCH`."""
        sigs = timeline.signatures()
        if not self.paths or sigs.is_empty():
            return None, None, 0.0
        if self.error is not None:
            raise self.error
        rates = [(float(cast(float, sigs.is_in(b.signatures.implode()).mean())), i)
                 for i, b in enumerate(self.baselines)]
        rate, best = max(rates, key=lambda r: r[0])
        return (self.paths[best], self.baselines[best], rate) if rate >= MIN_MATCH else (None, None, rate)


@dataclass
class Source:
    """One input to label into an entry: a run folder or trace, and what it is labelled with."""

    path: Path
    model: str | None = None
    config: str | None = None
    entry_id: str | None = None
    metrics: pl.DataFrame | None = None
    picker: BaselinePicker | None = None  # its own baselines (else the ones every source shares)

    @property
    def name(self) -> str:
        return self.entry_id or str(self.path)


@dataclass
class Shared:
    """What every source of one `add` or `build` shares: the baselines, and the entries already recorded."""

    picker: BaselinePicker
    known: set[str] = field(default_factory=set)


@dataclass
class Labelled:
    """A labelled source, ready to record: its rows and dataset.json entry (no rows: the dataset has it)."""

    entry: str
    model: str
    config: str
    rows: pl.DataFrame | None
    info: dict[str, Any]
    outcome: Outcome


def _trace_files(path: Path) -> list[Path]:
    return [f.path for f in inputs.resolve([path])]


def _input_folders(path: Path) -> list[Path]:
    """What an input owns on disk: a folder itself; a trace file, and the run folder it lies in (if any)."""
    path = path.resolve()
    if path.is_dir():
        return [path]
    return [path, *(p for p in path.parents[:2] if runfolder.read_manifest(p) is not None)]


def refuse_root_inside(root: str | Path, paths: Sequence[str | Path]) -> None:
    """OptionError when the dataset folder is, or is inside, one of the inputs: a dataset never writes there."""
    where = Path(root).resolve()
    for given in paths:
        for folder in _input_folders(Path(given)):
            if where == folder or folder in where.parents:
                raise OptionError(f"the dataset folder {root} is inside the input {given}; traceql never writes "
                                  "into its inputs: choose a folder outside them")


def label_one(source: Source, shared: Shared) -> Labelled:
    """Label one run folder or trace into an entry's rows, unless the dataset has that entry already (a task
    of :func:`traceql.parallel.iter_tasks`: it writes nothing)."""
    path = source.path
    name, cfg, info = describe(path, source.model, source.config)
    files = _trace_files(path)
    timeline = read_timeline(path)
    baseline_path, baseline, rate = (source.picker or shared.picker).pick(timeline)
    base_files = _trace_files(baseline_path) if baseline_path else []
    entry = source.entry_id or f"{name}-{cfg}-{content_id(files + base_files, extra=str(bool(baseline_path)))}"
    if entry in shared.known:
        return Labelled(entry, name, cfg, None, {}, Outcome(entry, "skipped", message="already in the dataset"))
    result = label(timeline, baseline=baseline, metrics=source.metrics)
    rows = schema.conform(result.kernels.with_columns(
        pl.lit(entry).alias("entry_id"), pl.lit(name).alias("model"), pl.lit(cfg).alias("config"),
        *(pl.lit(info.get(k)).alias(k) for k in (*RUN_KEYS, "profiler")),
        pl.lit(str(path)).alias("source"),
        pl.lit(str(baseline_path) if baseline_path else None, pl.String).alias("baseline"),
    ), schema.DATASET)  # one schema for every entry, whatever labelled it
    totals = result.to_dict()["totals"]
    info = {**info, "inputs": [str(f) for f in files], "baseline": str(baseline_path) if baseline_path else None,
            "baseline_match_rate": round(rate, 4) if baseline_path else None, "label_mode": result.mode,
            "cases": totals["cases"], "undecided": totals["undecided"], "decided_share": totals["decided_share"],
            "time_lost_ns": totals["time_lost_ns"], "notes": result.notes,
            "versions": _versions()}
    how = f" vs {baseline_path.name} ({rate:.0%} match)" if baseline_path else ""
    training = training_rows(rows.lazy()).select(pl.len()).collect().item()
    if training < rows.height:  # counted as `dataset summary` counts them: its isolated steps' rows apart
        how += f"; and {rows.height - training:,} rows of isolated steps (the reference, not counted)"
    return Labelled(entry, name, cfg, rows, info, Outcome(entry, "added", training, totals["cases"],
                                                          totals["time_lost_ns"], f"labels: {result.mode}{how}",
                                                          totals["undecided"]))


def record(ds: Dataset, labelled: Labelled, shared: Shared) -> Outcome:
    """Add a labelled source's rows to the dataset (under its lock), unless it has them already."""
    skipped = Outcome(labelled.entry, "skipped", message="already in the dataset")
    if labelled.rows is None or ds.has(labelled.entry):
        return skipped
    written = ds.add(labelled.entry, labelled.model, labelled.config, labelled.rows, labelled.info)
    shared.known.add(labelled.entry)  # run one after another, the next source sees it
    if written is None:
        return Outcome(labelled.entry, "skipped", message="added meanwhile by another writer")
    return labelled.outcome


def add_all(ds: Dataset, sources: Iterable[Source], shared: Shared, *, workers: int = 1,
            scheduler: str | None = None, progress: Progress | None = None) -> Iterator[tuple[Source, Outcome]]:
    """Label every source (in parallel where asked: ``traceql.parallel``) and record each in the order given,
    as soon as it and those before it are labelled. A failure does not stop the others."""
    with closing(iter_tasks(label_one, sources, common=shared, workers=workers, scheduler=scheduler,
                            name=lambda s: s.name, progress=progress,
                            cost=lambda s: disk_bytes([s.path]))) as labelled:
        for source, out in labelled:
            if isinstance(out, TraceqlError):
                yield source, Outcome(source.name, "failed", message=str(out))
            else:
                yield source, record(ds, out, shared)


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("traceql", "duckdb", "polars", "scikit-learn"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "unknown"
    return out
