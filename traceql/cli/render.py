"""What several commands print alike: a run's per-rank table, a kernel's table cell."""

from __future__ import annotations

from typing import Any

from rich.markup import escape

from traceql.cli.common import console, num_ms, table
from traceql.model.names import display_name

LONG_SPAN_NS = 100 * 10**9  # a rank's span from which the per-rank table is in seconds


def print_ranks(run_id: str, rows: Any) -> None:
    """One run's per-rank table; a long capture's times in seconds (in ms they would not fit 80 columns)."""
    unit, scale = ("s", 1e3) if (rows["span_ns"].max() or 0) >= LONG_SPAN_NS else ("ms", 1.0)

    def t(ns: Any) -> str:
        return num_ms(None if ns is None else ns / scale)

    ranks = table(f"Per rank of {run_id} (times in {unit})", ("rank", "overlap", "compute", "other", "idle", "span",
                                                           "cases", "lost", "lost %"))
    for r in rows.iter_rows(named=True):
        pct = "-" if r["comm_comp_overlap_pct"] is None else f"{r['comm_comp_overlap_pct']:.2f} %"
        share = "-" if r["time_lost_pct"] is None else f"{r['time_lost_pct']:.2f}"
        ranks.add_row(str(r["rank"]), pct, *(t(r[c]) for c in ("compute_ns", "non_compute_ns", "idle_ns", "span_ns")),
                      f"{r['cases']:,}", t(r["time_lost_ns"]), share)
    console.print(ranks)
    console.print("compute + other + idle = span; other: communication and memory operations with no compute "
                  "kernel running; overlap: how much of the communication ran beside compute")


def kernel_cell(row: dict[str, Any]) -> str:
    """A kernel of a table: its display name, its grid and block on the line below (from its signature)."""
    shape = (row["signature"] or "")[len(row["short_name"] or ""):].strip()
    return escape(f"{display_name(row['name'] or '', row['short_name'] or '')}\n  {shape}")
