"""Every relation of the normalized model and every result frame, declared once.

All times are int64 nanoseconds. A *run* is one training job (one or several input files); a *rank* is one
process of it. Each schema is an ordered ``column → polars dtype`` mapping; the DuckDB DDL of the model's
tables is generated from it (:func:`ddl`), and result frames are conformed to it (:func:`conform`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

if TYPE_CHECKING:
    from polars._typing import PolarsDataType  # a dtype, as a class or an instance

STR, I32, I64, F64, BOOL = pl.String, pl.Int32, pl.Int64, pl.Float64, pl.Boolean
Schema = dict[str, "PolarsDataType"]  # a frame's columns and their dtypes, in order

_KERNEL_SHAPE: Schema = {"grid_x": I32, "grid_y": I32, "grid_z": I32, "block_x": I32, "block_y": I32, "block_z": I32}
# the step whose CPU range holds the launching API call (``traceql.model.step_attribution``), filled after loading
_STEP: Schema = {"step": I32, "step_kind": STR}
DERIVED = set(_STEP)
_ACTIVITY: Schema = {"run_id": STR, "rank": I32, "device": I32, "stream": I64, "start_ns": I64, "end_ns": I64,
             "duration_ns": I64}

RELATIONS: dict[str, Schema] = {
    "runs": {"run_id": STR, "source": STR, "path": STR, "tool_version": STR, "schema_version": STR,
             "ranks": pl.List(I32), "file_bytes": I64},
    # clock_offset_ns: added to the rank's times, they are on the run's common clock (per-rank nsys exports each
    # count from their own session's start)
    "ranks": {"run_id": STR, "rank": I32, "path": STR, "pid": I64, "rank_from": STR, "clock_offset_ns": I64},
    "kernels": {**_ACTIVITY, "name": STR, "short_name": STR, **_KERNEL_SHAPE, "registers": I32, "shared_mem": I64,
                "correlation_id": I64, "kind": STR, "collective": STR, "launch_ns": I64, **_STEP},
    "memcpy": {**_ACTIVITY, "bytes": I64, "copy_kind": STR, "correlation_id": I64, "kind": STR, "launch_ns": I64,
               **_STEP},
    "nvtx": {"run_id": STR, "rank": I32, "start_ns": I64, "end_ns": I64, "text": STR, "domain": STR},
    # training steps: NVTX step_<i> / step_<i>_nosync (or Kineto ProfilerStep#<i>) ranges, CPU and GPU extent
    "steps": {"run_id": STR, "rank": I32, "step": I32, "step_kind": STR, "cpu_start_ns": I64, "cpu_end_ns": I64,
              "gpu_start_ns": I64, "gpu_end_ns": I64},
    # recorded stream waits (nsys: cudaStreamWaitEvent, and the cudaEventRecord it waits for): work launched on
    # ``stream`` after the call ``correlation_id`` waits for the work launched on ``waits_stream`` before the
    # call ``waits_correlation_id``
    "waits": {"run_id": STR, "rank": I32, "stream": I64, "correlation_id": I64, "waits_stream": I64,
              "waits_correlation_id": I64},
    "gpus": {"run_id": STR, "device": I32, "name": STR, "sm_count": I32, "memory_bytes": I64,
             "memory_bandwidth": I64, "clock_hz": I64, "compute_capability": STR, "bus_location": STR},
    # Nsight Compute: one row per profiled launch; every metric of the CSV follows these columns
    "kernel_metrics": {"path": STR, "ncu_id": I64, "kernel_name": STR, "short_name": STR, **_KERNEL_SHAPE,
                       "device": I32, "stream": I64, "launch_index": I64, "ncu_duration_ns": F64,
                       "ncu_sm_throughput_pct": F64, "ncu_memory_throughput_pct": F64,
                       "ncu_dram_throughput_pct": F64, "ncu_achieved_occupancy_pct": F64,
                       "ncu_registers_per_thread": F64},
    "kernel_metric_units": {"metric": STR, "unit": STR},
}

# Long strings that repeat across rows: held in polars as Categorical (``Trace.relation``); short ones are
# stored inline by polars anyway
CATEGORICAL: dict[str, tuple[str, ...]] = {"kernels": ("name", "short_name")}
# The relations with a row per GPU activity (millions): held as polars frames, seen by SQL as views
ACTIVITIES = ("kernels", "memcpy")

# The order every relation is read in: deterministic whatever order the engine inserted rows in.
ORDER_BY: dict[str, str] = {
    "runs": "run_id, path",
    "ranks": "run_id, rank",
    "kernels": "run_id, rank, start_ns, device, stream, end_ns, correlation_id",
    "memcpy": "run_id, rank, start_ns, device, stream, end_ns, correlation_id",
    "nvtx": "run_id, rank, start_ns, end_ns, text",
    "steps": "run_id, rank, cpu_start_ns, step_kind",
    "waits": "run_id, rank, correlation_id, stream",
    "gpus": "run_id, device",
    "kernel_metrics": "path, ncu_id",
    "kernel_metric_units": "metric",
}

# `detect`: one row per compute kernel (the --out columns) ...
CASES: Schema = {
    "run_id": STR, "rank": I32, "device": I32, "stream": I64, "start_ns": I64, "end_ns": I64, "duration_ns": I64,
    "name": STR, "short_name": STR, "signature": STR, "comm_overlap_ns": I64, "comm_overlap_frac": F64,
    "concurrent_comm": STR,
    "step": I32, "step_kind": STR, "baseline_ns": F64, "baseline_kind": STR, "reference_kind": STR,
    "twin_key": STR, "twin_pos": I64,
    "slowdown_ratio": F64, "score": F64, "is_slowdown": BOOL, "label_source": STR,
}
# `dataset add`: every entry's rows in one schema, whatever labelled them (a glob of data/**/*.parquet reads
# them as one table): the cases' columns (long names that repeat as Categorical), then the entry's provenance
DATASET: Schema = {
    **{c: pl.Categorical if c in ("name", "short_name", "signature", "twin_key") else t for c, t in CASES.items()},
    "entry_id": STR, "model": STR, "config": STR, "world_size": I32, "cap_size": F64, "batchsize": I32,
    "epochs": I32, "profiler": STR, "source": STR, "baseline": STR,
}
# ... one row per rank (after run_id, rank) ...
RANK_SUMMARY: Schema = {
    "span_ns": I64, "busy_ns": I64, "idle_ns": I64, "compute_ns": I64, "comm_ns": I64, "memory_ns": I64,
    "non_compute_ns": I64, "comm_compute_overlap_ns": I64, "comm_comp_overlap_pct": F64,
    "compute_kernels": I64, "cases": I64, "time_lost_ns": I64, "step_time_ns": I64, "time_lost_pct": F64,
}
# ... one row per normal step of each rank ...
STEP_COST: Schema = {"run_id": STR, "rank": I32, "step": I32, "gpu_ns": I64, "cases": I64,
                                      "time_lost_ns": I64}
# ... what the cases cost on the critical path of each run's normal steps (the first captured one left out):
# the steps' replayed time less their time without the cases, summed; the time the cases lost in those steps ...
CRITICAL: Schema = {"run_id": STR, "steps": I64, "critical_ns": I64, "lost_ns": I64}
# ... and the slowed signatures by time lost.
TOP_SIGNATURES: Schema = {
    "run_id": STR, "signature": STR, "short_name": STR, "name": STR, "cases": I64, "instances": I64,
    "median_ratio": F64, "time_lost_ns": I64, "concurrent_comm": STR,
}

_DUCKDB: dict[PolarsDataType, str] = {STR: "VARCHAR", I32: "INTEGER", I64: "BIGINT", F64: "DOUBLE", BOOL: "BOOLEAN"}


def _duckdb_type(dtype: PolarsDataType) -> str:
    if isinstance(dtype, pl.List):
        return _duckdb_type(dtype.inner) + "[]"
    return _DUCKDB[dtype]


def ddl(name: str) -> str:
    """``CREATE TABLE`` for one relation of the model."""
    cols = ", ".join(f"{c} {_duckdb_type(t)}" for c, t in RELATIONS[name].items())
    return f"CREATE TABLE {name} ({cols})"


def order(name: str) -> list[str]:
    """The columns one relation is sorted by (``ORDER_BY``)."""
    return [c.strip() for c in ORDER_BY[name].split(",")]


def columns(name: str) -> list[str]:
    """The column names of one relation of the model, in order."""
    return list(RELATIONS[name])


def source_columns(name: str) -> list[str]:
    """The columns of a relation that sources fill (the others are derived once everything is loaded)."""
    return [c for c in RELATIONS[name] if c not in DERIVED]


def held(name: str) -> Schema:
    """The dtypes of an activity relation as its frame holds them: ``CATEGORICAL`` columns as Categorical."""
    return {c: pl.Categorical if c in CATEGORICAL.get(name, ()) else t for c, t in RELATIONS[name].items()}


def empty(schema: Schema) -> pl.DataFrame:
    """A frame with no rows and the given schema."""
    return pl.DataFrame(schema=schema)


def conform(df: pl.DataFrame, schema: Schema, *, extra: bool = False) -> pl.DataFrame:
    """``df``'s columns of ``schema``, in its order and types; with ``extra``, its other columns follow."""
    head = [pl.col(c).cast(t) for c, t in schema.items()]
    rest = [c for c in df.columns if c not in schema] if extra else []
    return df.select(*head, *rest)
