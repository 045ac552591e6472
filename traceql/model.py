"""The normalized trace model: the column contract every source fills and every analysis reads.

All times are int64 nanoseconds. A *run* is one training job (one or several input files); a *rank* is
one process of it. A kernel's *signature* is its short name + grid + block: the unit whose durations
are comparable.
"""

from __future__ import annotations

import duckdb

RELATIONS: dict[str, str] = {
    "runs": """
        run_id VARCHAR, source VARCHAR, path VARCHAR, tool_version VARCHAR, schema_version VARCHAR,
        ranks INTEGER[], file_bytes BIGINT""",
    "ranks": "run_id VARCHAR, rank INTEGER, path VARCHAR, pid BIGINT, rank_from VARCHAR",
    "kernels": """
        run_id VARCHAR, rank INTEGER, device INTEGER, stream BIGINT, start_ns BIGINT, end_ns BIGINT,
        duration_ns BIGINT, name VARCHAR, short_name VARCHAR, grid_x INTEGER, grid_y INTEGER, grid_z INTEGER,
        block_x INTEGER, block_y INTEGER, block_z INTEGER, registers INTEGER, shared_mem BIGINT,
        correlation_id BIGINT, kind VARCHAR, collective VARCHAR, launch_ns BIGINT""",
    "memcpy": """
        run_id VARCHAR, rank INTEGER, device INTEGER, stream BIGINT, start_ns BIGINT, end_ns BIGINT,
        duration_ns BIGINT, bytes BIGINT, copy_kind VARCHAR, correlation_id BIGINT, kind VARCHAR, launch_ns BIGINT""",
    "nvtx": "run_id VARCHAR, rank INTEGER, start_ns BIGINT, end_ns BIGINT, text VARCHAR, domain VARCHAR",
    "gpus": """
        run_id VARCHAR, device INTEGER, name VARCHAR, sm_count INTEGER, memory_bytes BIGINT,
        memory_bandwidth BIGINT, clock_hz BIGINT, compute_capability VARCHAR, bus_location VARCHAR""",
    # Nsight Compute: one row per profiled launch; every metric of the CSV follows these columns
    "kernel_metrics": """
        path VARCHAR, ncu_id BIGINT, kernel_name VARCHAR, short_name VARCHAR, grid_x INTEGER, grid_y INTEGER,
        grid_z INTEGER, block_x INTEGER, block_y INTEGER, block_z INTEGER, device INTEGER, stream BIGINT,
        launch_index BIGINT, ncu_duration_ns DOUBLE, ncu_sm_throughput_pct DOUBLE, ncu_memory_throughput_pct DOUBLE,
        ncu_dram_throughput_pct DOUBLE, ncu_achieved_occupancy_pct DOUBLE, ncu_registers_per_thread DOUBLE""",
    "kernel_metric_units": "metric VARCHAR, unit VARCHAR",
}

# The order every relation is read in: deterministic whatever order the engine inserted rows in.
ORDER_BY: dict[str, str] = {
    "runs": "run_id, path",
    "ranks": "run_id, rank",
    "kernels": "run_id, rank, start_ns, device, stream, end_ns, correlation_id",
    "memcpy": "run_id, rank, start_ns, device, stream, end_ns, correlation_id",
    "nvtx": "run_id, rank, start_ns, end_ns, text",
    "gpus": "run_id, device",
    "kernel_metrics": "path, ncu_id",
    "kernel_metric_units": "metric",
}

# Communication kernels of NCCL, RCCL and HCCL, old (ncclKernel_*) and new (ncclDevKernel_*,
# ncclSymDevKernel_*) forms. Applied to the short name (nsys) or the name (Kineto).
COMM_NAME_REGEX = r"^(void )?(nccl|rccl|hccl)[A-Za-z]*Kernel"
# What a collective is called inside a comm kernel name: ncclDevKernel_AllReduce_Sum_f32_RING_LL,
# ncclKernel_AllReduce_RING_LL_Sum_float, ncclDevKernel_SendRecv(...).
COLLECTIVE_REGEX = r"Kernel_([A-Za-z]+)"
ALGO_REGEX = r"_(RING|TREE|COLLNET_DIRECT|COLLNET_CHAIN|NVLS_TREE|NVLS|PAT)(_|\(|$)"
PROTO_REGEX = r"_(LL128|LL|SIMPLE)(_|\(|$)"


def kind_expr(name_col: str) -> str:
    """SQL that classifies a kernel as ``comm`` or ``compute`` from its name column."""
    return f"CASE WHEN regexp_matches({name_col}, '{COMM_NAME_REGEX}', 'i') THEN 'comm' ELSE 'compute' END"


def collective_expr(name_col: str) -> str:
    """SQL naming the collective of a comm kernel, e.g. ``AllReduce`` or ``AllReduce/RING/LL``."""
    coll = f"regexp_extract({name_col}, '{COLLECTIVE_REGEX}', 1)"
    algo = f"regexp_extract({name_col}, '{ALGO_REGEX}', 1)"
    proto = f"regexp_extract({name_col}, '{PROTO_REGEX}', 1)"
    return f"concat_ws('/', nullif({coll}, ''), nullif({algo}, ''), nullif({proto}, ''))"


def create_relations(con: duckdb.DuckDBPyConnection) -> None:
    """Create the model's empty tables in ``con``; sources then insert into them."""
    for name, columns in RELATIONS.items():
        con.execute(f"CREATE TABLE {name} ({columns})")


def columns(name: str) -> list[str]:
    """The column names of one relation of the model, in order."""
    return [c.split()[0] for c in RELATIONS[name].replace("\n", " ").split(",") if c.strip()]
