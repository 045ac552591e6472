"""A part of an nsys export (``nsys_plan.Part``): the SQL that keeps its processes and its window of launches,
the communication kernels of other windows that ran beside its own kernels (their overlap needs them), and
every activity of its processes, narrow, for their time breakdown (which no window holds alone).
"""

from __future__ import annotations

from typing import cast

import duckdb
import polars as pl

from traceql.model.names import collective_expr, kind_expr
from traceql.sources.nsys_attach import KERNEL_TABLE, NsysFile
from traceql.sources.nsys_kernels import launches, rows
from traceql.sources.nsys_plan import Part

VALID = 't."end" >= t.start AND TRY(t."end" - t.start) IS NOT NULL'  # what the model keeps of a row


MARGIN = 10_000  # correlation ids either side of a window's range: calls of other threads a little out of order


def _between(value: str, bounds: tuple[int | None, int | None], margin: int = 0) -> str:
    """SQL: ``value`` in ``[lo - margin, hi + margin)``, an open bound where None."""
    lo, hi = bounds
    return " AND ".join([*([f"{value} >= {int(lo) - margin}"] if lo is not None else []),
                         *([f"{value} < {int(hi) + margin}"] if hi is not None else [])]) or "TRUE"


def _processes(part: Part) -> str:
    return "TRUE" if part.pids is None else \
        f"coalesce(t.globalPid, 0) IN ({', '.join(str(int(p)) for p in part.pids)})"


def where(part: Part | None, f: NsysFile) -> str:
    """SQL over a GPU activity row ``t`` (and its launch ``l``, joined): whether it belongs to ``part``: its
    processes, and its window of launch times (of start times, for a row no call launched). Only the rows
    whose correlation id is near the window's are read at all (their launches, and no others, are joined)."""
    if part is None:
        return "TRUE"
    if part.window is None:
        return _processes(part)
    launch, calls = launches(f)[0], part.calls
    if launch == "NULL" or calls is None:  # no CUDA calls recorded: the window is one of start times
        return f"({_processes(part)}) AND ({_between('t.start', part.window)})"
    near = f"({_between('t.correlationId', calls, MARGIN)}) OR (t.correlationId IS NULL)"
    member = (f"CASE WHEN {launch} IS NOT NULL THEN ({_between(launch, part.window)}) "
              f"WHEN t.correlationId IS NOT NULL THEN ({_between('t.correlationId', calls)}) "
              f"ELSE ({_between('t.start', part.window)}) END")
    return f"({_processes(part)}) AND ({near}) AND ({member})"


def launch_where(part: Part | None) -> str:
    """SQL over a CUDA call: whether a row of ``part`` may be one it launched (:func:`where`)."""
    if part is None or part.window is None or part.calls is None:
        return "TRUE"
    pids = "TRUE" if part.pids is None else \
        f"(globalTid >> 24) IN ({', '.join(f'({int(p)} >> 24)' for p in part.pids)})"
    return f"({pids}) AND ({_between('correlationId', part.calls, MARGIN)})"


def _classified(f: NsysFile) -> str:
    """SQL: the export's kernel names, each classified (``comm``, ``compute`` ...) once."""
    return f"SELECT id, {kind_expr('value')} AS kind FROM {f.alias}.StringIds"


def read_context(con: duckdb.DuckDBPyConnection, f: NsysFile, part: Part, kernels: pl.DataFrame) -> pl.DataFrame:
    """The communication kernels of ``part``'s processes that ran while its compute kernels (``kernels``, read)
    did, whichever window launched them: ``pid, device, start_ns, end_ns, kind, collective``."""
    compute = kernels.filter(pl.col("kind") == "compute")
    if part.window is None or compute.is_empty():
        return kernels.select("pid", "device", "start_ns", "end_ns", "kind", "collective").head(0)
    lo, hi = cast(int, compute["start_ns"].min()), cast(int, compute["end_ns"].max())
    # its own communication kernels among them too: a union of intervals holds each once
    return rows(con, f"""
        WITH names AS (SELECT id, value, {kind_expr('value')} AS kind FROM {f.alias}.StringIds)
        SELECT coalesce(t.globalPid, 0) AS pid, t.deviceId AS device, t.start AS start_ns, t."end" AS end_ns,
               'comm' AS kind, {collective_expr('sn.value')} AS collective
        FROM {f.alias}.{KERNEL_TABLE} t JOIN names sn ON sn.id = t.shortName AND sn.kind = 'comm'
        WHERE ({_processes(part)}) AND {VALID} AND t."end" > {int(lo)} AND t.start < {int(hi)}
    """)


ACTIVITY = "_activity"  # the table every activity of a window's ranks is put in, narrow


def read_activity(con: duckdb.DuckDBPyConnection, f: NsysFile, part: Part) -> str:
    """Every valid GPU activity of ``part``'s processes (all windows: ``run_id, rank, start_ns, end_ns, kind``,
    ``compute``, ``comm`` ... for kernels, ``memcpy``/``memset``) put in a table of the model's connection, for
    their time breakdown; its name."""
    a = f.alias
    mapped = f"JOIN _rankmap m ON m.alias = '{a}' AND m.pid = coalesce(t.globalPid, 0)"
    parts = [f"""SELECT m.run_id, m.rank, t.start AS start_ns, t."end" AS end_ns, coalesce(n.kind, 'compute') AS kind
                 FROM {a}.{KERNEL_TABLE} t {mapped} LEFT JOIN ({_classified(f)}) n ON n.id = t.shortName
                 WHERE {VALID}"""]
    for table, kind in (("CUPTI_ACTIVITY_KIND_MEMCPY", "memcpy"), ("CUPTI_ACTIVITY_KIND_MEMSET", "memset")):
        if table in f.tables:
            parts.append(f"""SELECT m.run_id, m.rank, t.start, t."end", '{kind}' FROM {a}.{table} t {mapped}
                             WHERE {VALID}""")
    con.execute(f"CREATE OR REPLACE TABLE {ACTIVITY} AS {' UNION ALL '.join(parts)}")  # compressed (engine)
    return ACTIVITY
