"""Label one run folder or trace and add its rows to a dataset; pair it with the isolated run it matches.

Each trace and each baseline is read once: a baseline's signature medians are kept for every source it is
compared with, and the timeline read to choose the baseline is the one labelled.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from traceql.dataset.store import Dataset, Outcome, content_id
from traceql.errors import OptionError
from traceql.labelling import Baseline, Timeline, label, read_baseline, read_timeline
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
    """Chooses, for each timeline, the isolated run whose kernel signatures it matches best."""

    def __init__(self, paths: Sequence[str | Path]) -> None:
        self.paths = [Path(p) for p in paths]
        self._read: dict[Path, Baseline] = {}

    def _baseline(self, path: Path) -> Baseline:
        if path not in self._read:
            self._read[path] = read_baseline(path)
        return self._read[path]

    def pick(self, timeline: Timeline) -> tuple[Path | None, Baseline | None, float]:
        """The best-matching baseline (its path, itself, its match rate); None below :data:`MIN_MATCH`."""
        sigs = timeline.signatures()
        if not self.paths or sigs.is_empty():
            return None, None, 0.0
        rates = [(float(sigs.is_in(self._baseline(b).signatures.implode()).mean()), b) for b in self.paths]
        rate, best = max(rates, key=lambda r: r[0])
        return (best, self._baseline(best), rate) if rate >= MIN_MATCH else (None, None, rate)


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


def add_one(ds: Dataset, path: Path, picker: BaselinePicker, *, model: str | None = None,
            config: str | None = None, metrics: pl.DataFrame | None = None,
            entry_id: str | None = None) -> Outcome:
    """Label one run folder or trace and add its rows, unless the dataset has it already."""
    name, cfg, info = describe(path, model, config)
    files = _trace_files(path)
    timeline = read_timeline(path)
    baseline_path, baseline, rate = picker.pick(timeline)
    base_files = _trace_files(baseline_path) if baseline_path else []
    entry = entry_id or f"{name}-{cfg}-{content_id(files + base_files, extra=str(bool(baseline_path)))}"
    if ds.has(entry):
        return Outcome(entry, "skipped", message="already in the dataset")
    result = label(timeline, baseline=baseline, metrics=metrics)
    rows = result.kernels.with_columns(
        pl.lit(entry).alias("entry_id"), pl.lit(name).alias("model"), pl.lit(cfg).alias("config"),
        *(pl.lit(info.get(k)).alias(k) for k in (*RUN_KEYS, "profiler")),
        pl.lit(str(path)).alias("source"),
        pl.lit(str(baseline_path) if baseline_path else None, pl.String).alias("baseline"),
    )
    totals = result.to_dict()["totals"]
    written = ds.add(entry, name, cfg, rows, {**info, "inputs": [str(f) for f in files],
                                              "baseline": str(baseline_path) if baseline_path else None,
                                              "baseline_match_rate": round(rate, 4) if baseline_path else None,
                                              "label_mode": result.mode, "cases": totals["cases"],
                                              "time_lost_ns": totals["time_lost_ns"], "notes": result.notes,
                                              "versions": _versions()})
    if written is None:
        return Outcome(entry, "skipped", message="added meanwhile by another writer")
    how = f" vs {baseline_path.name} ({rate:.0%} match)" if baseline_path else ""
    return Outcome(entry, "added", rows.height, totals["cases"], totals["time_lost_ns"], f"labels: {result.mode}{how}")


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("traceql", "duckdb", "polars", "scikit-learn"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "unknown"
    return out
