"""A part of an nsys export (``nsys_plan.Part``): the SQL that keeps its processes and its window of launches,
the communication kernels of other windows that ran beside its own kernels (their overlap needs them), and
every activity of its processes, narrow, for their time breakdown (which no window holds alone).
"""

from __future__ import annotations

import duckdb
import polars as pl

from traceql.model.names import collective_expr, kind_expr
from traceql.sources.nsys_attach import KERNEL_TABLE, NsysFile
from traceql.sources.nsys_kernels import launches, rows
from traceql.sources.nsys_plan import Part

VALID = 't."end" >= t.start AND TRY(t."end" - t.start) IS NOT NULL'  # what the model keeps of a row


def _window(part: Part, launch: str) -> str:
    """SQL: the row's launch (else its start) in the part's window."""
    at = f"coalesce({launch}, t.start)"
    lo, hi = part.window or (None, None)
    return " AND ".join([*([f"{at} >= {int(lo)}"] if lo is not None else []),
                         *([f"{at} < {int(hi)}"] if hi is not None else [])]) or "TRUE"


def _processes(part: Part) -> str:
    return "TRUE" if part.pids is None else \
        f"coalesce(t.globalPid, 0) IN ({', '.join(str(int(p)) for p in part.pids)})"


def where(part: Part | None, f: NsysFile) -> str:
    """SQL over a GPU activity row ``t`` (and its launch, joined): whether it belongs to ``part``."""
    if part is None:
        return "TRUE"
    return f"({_processes(part)}) AND ({_window(part, launches(f)[0])})"


def _classified(f: NsysFile) -> str:
    """SQL: the export's kernel names, each classified (``comm``, ``compute`` ...) once."""
    return f"SELECT id, {kind_expr('value')} AS kind FROM {f.alias}.StringIds"


def read_context(con: duckdb.DuckDBPyConnection, f: NsysFile, part: Part, kernels: pl.DataFrame) -> pl.DataFrame:
    """The communication kernels of ``part``'s processes launched outside its window that ran while its compute
    kernels (``kernels``, read) did: ``pid, device, start_ns, end_ns, kind, collective``."""
    compute = kernels.filter(pl.col("kind") == "compute")
    if part.window is None or compute.is_empty():
        return kernels.select("pid", "device", "start_ns", "end_ns", "kind", "collective").head(0)
    lo, hi = compute["start_ns"].min(), compute["end_ns"].max()
    launch, join = launches(f)
    outside = f"NOT ({_window(part, launch)})"
    return rows(con, f"""
        WITH names AS (SELECT id, value, {kind_expr('value')} AS kind FROM {f.alias}.StringIds)
        SELECT coalesce(t.globalPid, 0) AS pid, t.deviceId AS device, t.start AS start_ns, t."end" AS end_ns,
               'comm' AS kind, {collective_expr('sn.value')} AS collective
        FROM {f.alias}.{KERNEL_TABLE} t JOIN names sn ON sn.id = t.shortName AND sn.kind = 'comm' {join}
        WHERE ({_processes(part)}) AND {outside} AND {VALID} AND t."end" > {int(lo)} AND t.start < {int(hi)}
    """)


def read_activity(con: duckdb.DuckDBPyConnection, f: NsysFile, part: Part) -> pl.DataFrame:
    """Every valid GPU activity of ``part``'s processes (all windows): ``pid, start_ns, end_ns, kind``
    (``compute``, ``comm`` ... for kernels, ``memcpy``/``memset``), for their time breakdown."""
    a = f.alias
    parts = [f"""SELECT coalesce(t.globalPid, 0) AS pid, t.start AS start_ns, t."end" AS end_ns,
                        coalesce(n.kind, 'compute') AS kind
                 FROM {a}.{KERNEL_TABLE} t LEFT JOIN ({_classified(f)}) n ON n.id = t.shortName
                 WHERE ({_processes(part)}) AND {VALID}"""]
    for table, kind in (("CUPTI_ACTIVITY_KIND_MEMCPY", "memcpy"), ("CUPTI_ACTIVITY_KIND_MEMSET", "memset")):
        if table in f.tables:
            parts.append(f"""SELECT coalesce(t.globalPid, 0), t.start, t."end", '{kind}' FROM {a}.{table} t
                             WHERE ({_processes(part)}) AND {VALID}""")
    return rows(con, " UNION ALL ".join(parts)).with_columns(pl.col("kind").cast(pl.Categorical))
