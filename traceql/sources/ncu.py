"""Nsight Compute CSV (``ncu --csv --page raw`` or ``--page details``) → the ``kernel_metrics`` relation.

One row per profiled kernel launch: its identity (``ncu_id``, kernel name, short name, grid, block, device,
stream, ``launch_index`` = order among launches of the same short name, grid and block) and every metric,
typed as a number where its values are numbers. ``kernel_metric_units`` gives each metric's unit.
Lines ncu or the program print around the table (``==PROF==``, the program's own output) are skipped.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from traceql.errors import InputError
from traceql.model.engine import Model, insert_frame
from traceql.model.names import SIGNATURE_COLUMNS, short_names
from traceql.model.schema import columns
from traceql.sources.files import InputFile

FORMAT = "ncu-csv"
TIMELINE = False  # metrics of profiled launches, no timeline: in runs, they go with the first run
ID_COLS = {"ID": "ncu_id", "Kernel Name": "kernel_name", "Device": "device", "Stream": "stream",
           "Grid Size": "grid", "Block Size": "block"}
DETAILS_COLS = {"Section Name", "Metric Name", "Metric Unit", "Metric Value"}
# metrics every page gives, under one name: (raw metric candidates, details metric name)
CURATED = {
    "ncu_duration_ns": (["gpu__time_duration.sum"], "Duration"),
    "ncu_sm_throughput_pct": (["sm__throughput.avg.pct_of_peak_sustained_elapsed"], "Compute (SM) Throughput"),
    "ncu_memory_throughput_pct": (["gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"],
                                  "Memory Throughput"),
    "ncu_dram_throughput_pct": (["gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
                                 "dram__throughput.avg.pct_of_peak_sustained_elapsed"], "DRAM Throughput"),
    "ncu_achieved_occupancy_pct": (["sm__warps_active.avg.pct_of_peak_sustained_active"], "Achieved Occupancy"),
    "ncu_registers_per_thread": (["launch__registers_per_thread"], "Registers Per Thread"),
}
TIME_SCALE = {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6, "s": 1e9, "second": 1e9}


def sniff(head: bytes, path: Path) -> bool:
    """Any file named .csv: ncu writes no header of its own (a program's output may come first)."""
    return path.suffix.lower() == ".csv"


@dataclass
class NcuMetrics:
    """A parsed ncu CSV: ``metrics`` (one row per launch), ``units`` (metric → unit) and the page kind."""

    path: Path
    page: str
    metrics: pl.DataFrame
    units: pl.DataFrame


def _table_text(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path=str(path)) from exc
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID",')), None)
    if start is None:
        raise InputError("not an Nsight Compute CSV (no \"ID\" header row): was it written with ncu --csv?",
                         path=str(path))
    return "\n".join(line for line in lines[start:] if line.startswith('"'))


def _numeric(df: pl.DataFrame, skip: set[str]) -> pl.DataFrame:
    """Cast every column whose non-empty values all parse as numbers (thousands separators allowed)."""
    casts = []
    for col in df.columns:
        if col in skip:
            continue
        num = df[col].str.replace_all(",", "").cast(pl.Float64, strict=False)
        given = df[col].is_not_null() & (df[col] != "")
        if given.any() and num.filter(given).null_count() == 0:
            casts.append(num.alias(col))
    return df.with_columns(casts)


def _dims(col: str) -> list[pl.Expr]:
    parts = pl.col(col).str.extract_all(r"\d+")
    return [parts.list.get(i, null_on_oob=True).cast(pl.Int32).alias(f"{col}_{a}") for i, a in enumerate("xyz")]


def _raw(df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    units_row = df.filter(pl.col("ID") == "")
    data = df.filter(pl.col("ID") != "")
    units = (units_row.head(1).transpose(include_header=True, header_name="metric", column_names=["unit"])
             if units_row.height else pl.DataFrame({"metric": df.columns, "unit": [""] * df.width}))
    data = _numeric(data, set(ID_COLS) | {"Process Name", "Host Name"})
    units = units.with_columns(pl.col("unit").fill_null(""))
    curated = []
    for name, (candidates, _) in CURATED.items():
        col = next((c for c in candidates if c in data.columns), None)
        value = pl.col(col).cast(pl.Float64, strict=False) if col else pl.lit(None, pl.Float64)
        if col and name == "ncu_duration_ns":
            value = value * _time_scale(units, col)
        curated.append(value.alias(name))
    return data.with_columns(curated), units


class UnitError(ValueError):
    """A duration metric in a unit that is not a unit of time."""


def _time_scale(units: pl.DataFrame, metric: str) -> float:
    """Nanoseconds per unit of ``metric`` (ns when the CSV gives no unit)."""
    found = units.filter(pl.col("metric") == metric)["unit"]
    unit = (found[0] if len(found) else "") or "ns"
    if unit not in TIME_SCALE:
        raise UnitError(f"{metric} is in {unit!r}, not a unit of time (ns, us, ms, s)")
    return TIME_SCALE[unit]


def _details(df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    ident = [c for c in df.columns if c not in DETAILS_COLS and not c.startswith(("Rule ", "Estimated "))]
    rows = df.filter((pl.col("Metric Name") != "") & pl.col("Metric Name").is_not_null()).with_columns(
        pl.when(pl.col("Metric Name").is_in(ident))  # e.g. "Block Size" is a column and a metric
        .then(pl.format("{}: {}", "Section Name", "Metric Name")).otherwise(pl.col("Metric Name")).alias("Metric Name")
    )
    units = rows.group_by("Metric Name").agg(pl.col("Metric Unit").first()).rename(
        {"Metric Name": "metric", "Metric Unit": "unit"})
    wide = rows.pivot(on="Metric Name", index=ident, values="Metric Value", aggregate_function="first")
    wide = _numeric(wide, set(ident))
    curated = []
    for name, (_, metric) in CURATED.items():
        if metric not in wide.columns or wide.schema[metric] != pl.Float64:
            curated.append(pl.lit(None, pl.Float64).alias(name))
            continue
        value = pl.col(metric)
        if name == "ncu_duration_ns":
            value = value * _time_scale(units, metric)
        curated.append(value.alias(name))
    return wide.with_columns(curated), units.with_columns(pl.col("unit").fill_null(""))


def read_ncu(path: Path) -> NcuMetrics:
    """Parse one ncu CSV of either page; InputError when the layout is neither."""
    text = _table_text(path)
    try:
        df = pl.read_csv(io.StringIO(text), infer_schema=False, truncate_ragged_lines=True)
    except pl.exceptions.PolarsError as exc:
        raise InputError(f"unreadable ncu CSV ({str(exc).splitlines()[0]})", path=str(path)) from None
    missing = {"ID", "Kernel Name", "Grid Size", "Block Size"} - set(df.columns)
    if missing:
        raise InputError(f"unknown ncu CSV layout: no {', '.join(sorted(missing))} column "
                         "(expected ncu --csv --page raw or --page details)", path=str(path))
    try:
        if DETAILS_COLS <= set(df.columns):
            page, (metrics, units) = "details", _details(df)
        elif any("__" in c for c in df.columns):
            page, (metrics, units) = "raw", _raw(df)
        else:
            page = None
    except UnitError as exc:
        raise InputError(str(exc), path=str(path)) from None
    if page is None:
        raise InputError("unknown ncu CSV layout: neither raw metrics (name__metric columns) nor the details "
                         "page (Section/Metric Name/Value columns)", path=str(path))
    if metrics.is_empty():
        raise InputError("the ncu CSV has no profiled kernels (did --launch-skip skip them all?)", path=str(path))
    metrics = metrics.rename({k: v for k, v in ID_COLS.items() if k in metrics.columns})
    metrics = (
        metrics.join(short_names(metrics["kernel_name"], "kernel_name"), on="kernel_name", how="left",
                     maintain_order="left")
        .with_columns(pl.col("ncu_id").cast(pl.Int64), *_dims("grid"), *_dims("block"),
                      pl.col("device").cast(pl.Int32, strict=False), pl.col("stream").cast(pl.Int64, strict=False))
        .sort("ncu_id")
        .with_columns(pl.int_range(pl.len()).over(SIGNATURE_COLUMNS).alias("launch_index"))
        .with_columns(pl.lit(str(path)).alias("path"))
    )
    return NcuMetrics(path, page, metrics, units)


def load(model: Model, files: list[InputFile]) -> None:
    """Fill ``kernel_metrics``/``kernel_metric_units`` with the rows of every ncu CSV given."""
    parsed = [read_ncu(f.path) for f in files]
    base = columns("kernel_metrics")
    metrics = pl.concat([p.metrics for p in parsed], how="diagonal_relaxed")
    metrics = metrics.select(base + [c for c in metrics.columns if c not in base])
    units = pl.concat([p.units for p in parsed]).unique(subset="metric", keep="first")
    insert_frame(model.con, "kernel_metrics", metrics, replace=True)
    insert_frame(model.con, "kernel_metric_units", units, replace=True)
