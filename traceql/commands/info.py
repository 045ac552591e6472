"""`traceql info`: what a newcomer wants to know first about a trace, computed in SQL."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from traceql.model.names import display_name
from traceql.trace import Trace, read_trace


def _rows(trace: Trace, query: str) -> list[dict[str, Any]]:
    return trace.own_sql(query).to_dicts()


def _counts(trace: Trace, table: str, key: str) -> dict[str, int]:
    query = f"SELECT {key} AS k, count(*) AS n FROM {table} GROUP BY 1 ORDER BY 1"
    return {str(r["k"]): r["n"] for r in _rows(trace, query)}


def _steps(trace: Trace) -> dict[str, Any]:
    """The step ranges: ``total`` and ``by_kind`` count a step once per rank that ran it; ``steps`` and
    ``steps_by_kind`` count each step of a run once; ``ranks`` ran any, from ``per_rank[0]`` to ``[1]`` each."""
    per_rank = _rows(trace, "SELECT count(*) AS n FROM steps GROUP BY run_id, rank")
    counts = [r["n"] for r in per_rank]
    return {"total": trace.own_sql("SELECT count(*) FROM steps").item(),
            "by_kind": _counts(trace, "steps", "step_kind"),
            "steps": trace.own_sql("SELECT count(*) FROM (SELECT DISTINCT run_id, step, step_kind FROM steps)").item(),
            "steps_by_kind": {str(r["k"]): r["n"] for r in _rows(trace, """
                SELECT step_kind AS k, count(*) AS n FROM (SELECT DISTINCT run_id, step, step_kind FROM steps)
                GROUP BY 1 ORDER BY 1""")},
            "ranks": len(counts), "per_rank": [min(counts, default=0), max(counts, default=0)]}


def _top_kernels(trace: Trace, total_ns: int, top: int) -> list[dict[str, Any]]:
    """The kernels that took the most GPU time, told apart as `detect` tells them (``kernel``: the short name and
    its functor or GEMM configuration, ``model.names.display_name``)."""
    import polars as pl

    by_name = trace.own_sql("""SELECT name, short_name, kind, count(*) AS count, sum(duration_ns)::BIGINT AS total_ns
                               FROM kernels GROUP BY ALL""")
    if by_name.is_empty():
        return []
    names = by_name.select("name", "short_name").unique()
    shown = names.with_columns(pl.Series("kernel", [display_name(n or "", s or "") for n, s in names.rows()],
                                         dtype=pl.String))
    grouped = (by_name.join(shown, on=["name", "short_name"], how="left", nulls_equal=True)
               .group_by("kernel", "short_name", "kind")
               .agg(pl.col("count").sum(), pl.col("total_ns").sum())
               .with_columns((pl.col("total_ns") / pl.col("count")).round().alias("mean_ns"),
                             (100.0 * pl.col("total_ns") / max(total_ns, 1)).round(2).alias("pct"))
               .sort(["total_ns", "kernel"], descending=[True, False]).head(top))
    return grouped.select("kernel", "short_name", "kind", "count", "total_ns", "mean_ns", "pct").to_dicts()


def trace_info(trace: Trace, *, top: int = 10) -> dict[str, Any]:
    """A JSON-ready summary: runs, GPUs, ranks and capture span, kernel counts, top kernels, collectives.

    Args:
        trace: an open trace (:func:`traceql.read_trace`).
        top: how many kernels to list by GPU time (``top_kernels``).

    Returns:
        ``runs``, ``gpus``, ``ranks``, ``kernels``, ``memcpy``, ``nvtx``, ``kernel_metrics``, ``steps``,
        ``top_kernels`` and ``collectives``, as JSON values.
    """
    total_kernel_ns = trace.own_sql("SELECT coalesce(sum(duration_ns), 0)::BIGINT AS t FROM kernels").item()
    return {
        "runs": _rows(trace, """
            SELECT run_id, source, path, tool_version, schema_version, ranks, file_bytes
            FROM runs ORDER BY run_id, path"""),
        "gpus": _rows(trace, """
            SELECT run_id, device, name, sm_count, memory_bytes, compute_capability
            FROM gpus ORDER BY run_id, device"""),
        # the span: the first GPU activity to the last, kernels and memory operations (as `detect`'s)
        "ranks": _rows(trace, """
            WITH activity AS (
                SELECT run_id, rank, device, start_ns, end_ns, 1 AS kernel FROM kernels
                UNION ALL SELECT run_id, rank, device, start_ns, end_ns, 0 AS kernel FROM memcpy)
            SELECT r.run_id, r.rank, r.pid, r.rank_from,
                   list(DISTINCT a.device ORDER BY a.device) FILTER (WHERE a.kernel = 1) AS devices,
                   min(a.start_ns) AS start_ns, max(a.end_ns) AS end_ns, max(a.end_ns) - min(a.start_ns) AS span_ns,
                   count(a.start_ns) FILTER (WHERE a.kernel = 1) AS kernels
            FROM ranks r LEFT JOIN activity a ON a.run_id = r.run_id AND a.rank = r.rank
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
        "steps": _steps(trace),
        "top_kernels": _top_kernels(trace, total_kernel_ns, top),
        "collectives": _rows(trace, """
            SELECT collective, count(*) AS count, sum(duration_ns)::BIGINT AS total_ns
            FROM kernels WHERE kind = 'comm' GROUP BY 1 ORDER BY total_ns DESC"""),
    }


def info(paths: str | Path | Sequence[str | Path] | None = None, *, top: int = 10) -> dict[str, Any]:
    """`traceql info`: the summary of a trace's files or folders (the embedded example when None).

    Args:
        paths: the trace files or folders (none: the embedded example).
        top: how many kernels to list by GPU time.

    Returns:
        :func:`trace_info`'s summary, and the ``notes`` reading called for.
    """
    with read_trace(paths) as trace:
        return {**trace_info(trace, top=top), "notes": trace.notes}
