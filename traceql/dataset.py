"""Slowdown datasets: label runs and traces, keep every compute kernel's row in one parquet dataset.

    import traceql.dataset as ds
    ds.add("slowdowns/", ["runs/gpt2-cap2", "ddp.sqlite"], baselines=["single.sqlite"])
    ds.summary("slowdowns/")                      # cases, time lost, ratio distribution per model/config
    ds.build("sweep.json", "slowdowns/")          # collect a sweep of configurations, then add it
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from traceql import inputs
from traceql.datastore import Dataset, Outcome, content_id
from traceql.errors import TraceqlError

MIN_MATCH = 0.5


def _manifest(path: Path) -> dict[str, Any] | None:
    try:
        m = json.loads((path / "manifest.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return m if str(m.get("format", "")).startswith("traceql-run/") else None


def describe(path: Path, model: str | None, config: str | None) -> tuple[str, str, dict[str, Any]]:
    """Model, configuration and provenance of an input: from a run folder's manifest, else the options."""
    m = _manifest(path) if path.is_dir() else None
    if m is None:
        return model or path.name.split(".")[0], config or "trace", {"source": "trace"}
    local = m["input"]["local_config"]
    cfg = f"ws{local['world_size']}_cap{local['cap_size']}_bs{local['batchsize']}"
    info = {"source": "run", "run_name": m.get("run_name"), "profiler": m["profiler"]["name"],
            "profiler_version": m["profiler"].get("version"), "environment": m.get("environment"),
            "device": m.get("device"), **{k: local[k] for k in ("world_size", "cap_size", "batchsize", "epochs")}}
    return model or Path(m["input"]["path"]).name, config or cfg, info


class BaselinePicker:
    """Chooses, for each trace, the isolated run whose kernel signatures it matches best."""

    def __init__(self, paths: Sequence[str | Path]) -> None:
        self.paths = [Path(p) for p in paths]
        self._signatures: dict[Path, set[str]] = {}

    def _sigs(self, path: Path) -> set[str]:
        if path not in self._signatures:
            from analyzers.baselines import isolated_baseline
            from traceql.trace import read_trace

            with read_trace(path) as t:
                self._signatures[path] = set(isolated_baseline(t.kernels)["signature"].to_list())
        return self._signatures[path]

    def pick(self, trace: Path) -> tuple[Path | None, float]:
        if not self.paths:
            return None, 0.0
        from analyzers.overlap import with_signature
        from traceql.trace import read_trace

        with read_trace(trace) as t:
            sigs = with_signature(t.kernels.filter(pl.col("kind") == "compute"))["signature"]
        if sigs.is_empty():
            return None, 0.0
        rates = [(float(sigs.is_in(list(self._sigs(b))).mean()), b) for b in self.paths]
        rate, best = max(rates, key=lambda r: r[0])
        return (best, rate) if rate >= MIN_MATCH else (None, rate)


def _trace_files(path: Path) -> list[Path]:
    return [f.path for f in inputs.resolve([path])]


def add_one(ds: Dataset, path: Path, picker: BaselinePicker, *, model: str | None = None,
            config: str | None = None, metrics: Sequence[Path] | None = None,
            entry_id: str | None = None) -> Outcome:
    """Label one run folder or trace and add its rows, unless the dataset has it already."""
    from traceql.detect import detect

    name, cfg, info = describe(path, model, config)
    files = _trace_files(path)
    baseline, rate = picker.pick(path)
    base_files = _trace_files(baseline) if baseline else []
    entry = entry_id or f"{name}-{cfg}-{content_id(files + base_files, extra=str(bool(baseline)))}"
    if ds.has(entry):
        return Outcome(entry, "skipped", message="already in the dataset")
    result = detect(path, baseline=[baseline] if baseline else None, metrics=metrics or None)
    rows = result.kernels.with_columns(
        pl.lit(entry).alias("entry_id"), pl.lit(name).alias("model"), pl.lit(cfg).alias("config"),
        *(pl.lit(info.get(k)).alias(k) for k in ("world_size", "cap_size", "batchsize", "epochs", "profiler")),
        pl.lit(str(path)).alias("source"), pl.lit(str(baseline) if baseline else None, pl.String).alias("baseline"),
    )
    totals = result.to_dict()["totals"]
    ds.add(entry, name, cfg, rows, {**info, "inputs": [str(f) for f in files],
                                    "baseline": str(baseline) if baseline else None,
                                    "baseline_match_rate": round(rate, 4) if baseline else None,
                                    "label_mode": result.mode, "cases": totals["cases"],
                                    "time_lost_ns": totals["time_lost_ns"], "notes": result.notes,
                                    "versions": _versions()})
    return Outcome(entry, "added", rows.height, totals["cases"], totals["time_lost_ns"],
                   f"labels: {result.mode}" + (f" vs {baseline.name} ({rate:.0%} match)" if baseline else ""))


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("traceql", "duckdb", "polars", "scikit-learn"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "unknown"
    return out


def add(root: str | Path, paths: Sequence[str | Path], *, baselines: Sequence[str | Path] = (),
        model: str | None = None, config: str | None = None,
        progress: Callable[[str], None] | None = None) -> list[Outcome]:
    """Add run folders or traces to the dataset at ``root``; each is one entry. A failure does not stop
    the others; it is reported in the returned outcomes."""
    ds = Dataset(root)
    picker = BaselinePicker(baselines)
    out = []
    for path in map(Path, paths):
        if progress:
            progress(str(path))
        try:
            out.append(add_one(ds, path, picker, model=model, config=config))
        except TraceqlError as exc:
            out.append(Outcome(str(path), "failed", message=str(exc)))
    return out


def summary(root: str | Path) -> pl.DataFrame:
    """Per model and configuration: entries, kernel rows, cases, time lost, slowdown ratio distribution."""
    ds = Dataset(root)
    rows = ds.scan()
    case = pl.col("is_slowdown")
    ratio = pl.col("slowdown_ratio").filter(case)
    return (
        rows.group_by("model", "config")
        .agg(pl.col("entry_id").n_unique().alias("entries"), pl.len().alias("rows"),
             case.sum().cast(pl.Int64).alias("cases"),
             (case.mean() * 100).round(2).alias("case_pct"),
             ((pl.col("duration_ns") - pl.col("baseline_ns")).filter(case).sum() / 1e6).round(3)
             .alias("time_lost_ms"),
             ratio.median().round(3).alias("ratio_median"), ratio.quantile(0.9).round(3).alias("ratio_p90"),
             ratio.max().round(3).alias("ratio_max"))
        .sort("model", "config")
        .collect()
    )
