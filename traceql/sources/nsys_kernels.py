"""An attached Nsight Systems export's kernels, read in one query: names resolved through ``StringIds`` (as an
ENUM, which reaches polars as Categorical), each kernel's launching CUDA API call found by its correlation id.

A kernel whose name ids are missing from ``StringIds`` (or point at no text) is kept, named ``<unknown string
ID>``, and counted in a warning. A duration or shared memory size past 64 bits is NULL (validation then drops
the row).
"""

from __future__ import annotations

from typing import Any, cast

import duckdb
import polars as pl

from traceql.model.names import collective_expr, kind_expr
from traceql.sources.nsys_attach import KERNEL_TABLE, READ_ERRORS, NsysFile, empty_kernels, fail


def launches(f: NsysFile) -> tuple[str, str]:
    """A LEFT JOIN giving each GPU activity ``t`` its CUDA API call's start (``l.launch``), or NULL; the calls
    are read once per export (:func:`read_launches`)."""
    if "CUPTI_ACTIVITY_KIND_RUNTIME" not in f.tables:
        return "NULL", ""
    return "l.launch", f"LEFT JOIN _launch_{f.alias} l ON l.correlationId = t.correlationId " \
                       "AND l.p = coalesce(t.globalPid, 0) >> 24"


def read_launches(con: duckdb.DuckDBPyConnection, f: NsysFile, where: str = "TRUE") -> None:
    """The start of each CUDA API call (those ``where`` holds for), by correlation id and process, as a temp
    table for :func:`launches`."""
    if "CUPTI_ACTIVITY_KIND_RUNTIME" in f.tables:
        con.execute(f"""CREATE OR REPLACE TEMP TABLE _launch_{f.alias} AS
                        SELECT correlationId, globalTid >> 24 AS p, min(start) AS launch
                        FROM {f.alias}.CUPTI_ACTIVITY_KIND_RUNTIME WHERE {where} GROUP BY ALL""")


def rows(con: duckdb.DuckDBPyConnection, query: str) -> pl.DataFrame:
    """A query's result as a polars frame, read whole: DuckDB then builds the Arrow arrays on every core."""
    return cast(pl.DataFrame, pl.from_arrow(con.sql(query).fetch_arrow_table(), rechunk=False))  # a table: a frame


def _strings(f: NsysFile, unknown: bool) -> str:
    """The export's strings by id; with ``unknown``, also ``<unknown string ID>`` for every id its kernels
    name that has no text (:func:`_unknown`)."""
    known = f"SELECT id, value FROM {f.alias}.StringIds WHERE value IS NOT NULL"
    return f"{known} UNION ALL SELECT id, value FROM _unknown_{f.alias}" if unknown else known


def _unknown(con: duckdb.DuckDBPyConnection, f: NsysFile) -> None:
    a = f.alias
    con.execute(f"""CREATE OR REPLACE TEMP TABLE _unknown_{a} AS
                    SELECT id, '<unknown string ' || id || '>' AS value
                    FROM (SELECT shortName AS id FROM {a}.{KERNEL_TABLE}
                          UNION SELECT demangledName FROM {a}.{KERNEL_TABLE})
                    WHERE id IS NOT NULL
                      AND id NOT IN (SELECT id FROM {a}.StringIds WHERE value IS NOT NULL)""")


def _query(con: duckdb.DuckDBPyConnection, f: NsysFile, unknown: bool, where: str = "TRUE") -> pl.DataFrame:
    a = f.alias
    launch, launch_join = launches(f)
    con.execute(f"CREATE OR REPLACE TYPE _strings_{a} AS ENUM "
                f"(SELECT DISTINCT value FROM ({_strings(f, unknown)}))")
    return rows(con, f"""
        WITH names AS (  -- classified once per name, not once per kernel
            SELECT id, value::_strings_{a} AS value, {kind_expr('value')} AS kind,
                   CASE WHEN {kind_expr('value')} = 'comm' THEN {collective_expr('value')} END AS collective
            FROM ({_strings(f, unknown)})
        )
        SELECT coalesce(t.globalPid, 0) AS pid, t.deviceId AS device, t.streamId AS stream, t.start AS start_ns,
               t."end" AS end_ns, TRY(t."end" - t.start) AS duration_ns, coalesce(dn.value, sn.value) AS name,
               sn.value AS short_name, t.gridX AS grid_x, t.gridY AS grid_y, t.gridZ AS grid_z,
               t.blockX AS block_x, t.blockY AS block_y, t.blockZ AS block_z,
               t.registersPerThread AS registers,
               TRY(t.staticSharedMemory + t.dynamicSharedMemory) AS shared_mem,
               t.correlationId AS correlation_id, coalesce(sn.kind, 'compute') AS kind, sn.collective,
               {launch} AS launch_ns,
               (t.shortName IS NOT NULL AND sn.id IS NULL) OR (t.demangledName IS NOT NULL AND dn.id IS NULL)
                   AS _unknown
        FROM {a}.{KERNEL_TABLE} t
        LEFT JOIN names sn ON sn.id = t.shortName
        LEFT JOIN names dn ON dn.id = t.demangledName
        {launch_join}
        WHERE {where}
    """)


def read_kernels(con: duckdb.DuckDBPyConnection, f: NsysFile, where: str = "TRUE",
                 *, part: bool = False, launch_where: str = "TRUE") -> tuple[pl.DataFrame, list[str]]:
    """This export's kernels (those ``where`` holds for, a SQL condition on the kernel row ``t`` and its launch
    ``l``) with their process (``pid``), names and launching call, and a warning when some name ids have no
    text; ``f.pids`` set to the processes that ran kernels. SchemaError when it has none (unless it is a
    ``part`` of the export, which may)."""
    notes = []
    try:
        read_launches(con, f, launch_where)
        kernels = _query(con, f, unknown=False, where=where)
        if kernels["_unknown"].any():
            n = int(kernels["_unknown"].sum())
            _unknown(con, f)
            kernels = _query(con, f, unknown=True, where=where)
            example = cast("tuple[Any]", con.execute(f"SELECT min(id) FROM _unknown_{f.alias}").fetchone())[0]
            con.execute(f"DROP TABLE _unknown_{f.alias}")
            notes.append(f"warning: {f.path}: kernels: {n:,} kernels name string ids that its StringIds table "
                         f"lacks (e.g. {example}): kept, named <unknown string ID>")
    except READ_ERRORS as exc:
        raise fail(f.path, exc) from exc
    f.pids = kernels["pid"].unique().sort().to_list()
    if not f.pids and not part:
        raise empty_kernels(f.path)
    return kernels.drop("_unknown"), notes
