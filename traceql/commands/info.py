"""`traceql info`: what a newcomer wants to know first about a trace, computed in SQL."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from traceql.trace import Trace, read_trace


def _rows(trace: Trace, query: str) -> list[dict[str, Any]]:
    return trace.own_sql(query).to_dicts()


def _counts(trace: Trace, table: str, key: str) -> dict[str, int]:
    query = f"SELECT {key} AS k, count(*) AS n FROM {table} GROUP BY 1 ORDER BY 1"
    return {str(r["k"]): r["n"] for r in _rows(trace, query)}


def trace_info(trace: Trace, *, top: int = 10) -> dict[str, Any]:
    """A JSON-ready summary: runs, GPUs, ranks and capture span, kernel counts, top kernels, collectives."""
    total_kernel_ns = trace.own_sql("SELECT coalesce(sum(duration_ns), 0)::BIGINT AS t FROM kernels").item()
    return {
        "runs": _rows(trace, """
            SELECT run_id, source, path, tool_version, schema_version, ranks, file_bytes
            FROM runs ORDER BY run_id, path"""),
        "gpus": _rows(trace, """
            SELECT run_id, device, name, sm_count, memory_bytes, compute_capability
            FROM gpus ORDER BY run_id, device"""),
        "ranks": _rows(trace, """
            SELECT r.run_id, r.rank, r.pid, r.rank_from, list(DISTINCT k.device ORDER BY k.device) AS devices,
                   min(k.start_ns) AS start_ns, max(k.end_ns) AS end_ns, max(k.end_ns) - min(k.start_ns) AS span_ns,
                   count(k.start_ns) AS kernels
            FROM ranks r LEFT JOIN kernels k ON k.run_id = r.run_id AND k.rank = r.rank
            GROUP BY ALL ORDER BY r.run_id, r.rank"""),
        "kernels": {
            "total": trace.own_sql("SELECT count(*) FROM kernels").item(),
            "total_ns": total_kernel_ns,
            "by_kind": _counts(trace, "kernels", "kind"),
            "by_device": _counts(trace, "kernels", "device"),
            "by_rank": _counts(trace, "kernels", "rank"),
        },
        "memcpy": {
            "total": trace.own_sql("SELECT count(*) FROM memcpy").item(),
            "by_kind": _counts(trace, "memcpy", "kind"),
        },
        "nvtx": {"total": trace.own_sql("SELECT count(*) FROM nvtx").item()},
        "kernel_metrics": _rows(trace, """
            SELECT count(*) AS launches, count(DISTINCT kernel_name) AS kernels FROM kernel_metrics""")[0],
        "steps": {"total": trace.own_sql("SELECT count(*) FROM steps").item(),
                  "by_kind": _counts(trace, "steps", "step_kind")},
        "top_kernels": trace.own_sql(
            """SELECT short_name, kind, count(*) AS count, sum(duration_ns)::BIGINT AS total_ns,
                      round(avg(duration_ns)) AS mean_ns, round(100.0 * sum(duration_ns) / ?, 2) AS pct
               FROM kernels GROUP BY short_name, kind ORDER BY total_ns DESC, short_name LIMIT ?""",
            [max(total_kernel_ns, 1), top],
        ).to_dicts(),
        "collectives": _rows(trace, """
            SELECT collective, count(*) AS count, sum(duration_ns)::BIGINT AS total_ns
            FROM kernels WHERE kind = 'comm' GROUP BY 1 ORDER BY total_ns DESC"""),
    }


def info(paths: str | Path | Sequence[str | Path] | None = None, *, top: int = 10) -> dict[str, Any]:
    """`traceql info`: the summary of a trace's files or folders (the embedded example when None)."""
    with read_trace(paths) as trace:
        return {**trace_info(trace, top=top), "notes": trace.notes}
