"""`traceql detect`: the compute kernels slowed by overlapping communication, per rank and by signature."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from traceql.cli.common import (
    Files,
    Format,
    FormatOption,
    console,
    emit_json,
    guarded,
    ms,
    note,
    num_ms,
    spinner,
    table,
)
from traceql.model.names import display_name

OUT_FORMATS = {".csv": "csv", ".json": "json"}  # by suffix; anything else is parquet


@guarded
def detect(
    files: Files = None,
    baseline: Annotated[
        list[Path] | None,
        typer.Option("--baseline", "-b", help="isolated run(s) of the same model and shapes (paired labels)"),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="write one row per compute kernel (.parquet, .csv or .json)")
    ] = None,
    fmt: FormatOption = Format.table,
    threshold: Annotated[float, typer.Option(help="slowdown ratio that makes a case (above 1.0)")] = 1.2,
    top: Annotated[int, typer.Option(help="how many slowed signatures to list", min=1)] = 10,
    metrics: Annotated[
        list[Path] | None,
        typer.Option("--metrics", "-m", help="ncu CSV(s) of the same workload: adds ncu_* metrics to --out rows"),
    ] = None,
    hta_compat: Annotated[
        bool, typer.Option("--hta-compat", help="per-rank breakdown as Holistic Trace Analysis 0.5.0 computes it")
    ] = False,
    single_trace: Annotated[
        bool, typer.Option("--single-trace", help="label by the detector, hiding the trace's isolated steps")
    ] = False,
) -> None:
    """Name the compute kernels slowed by overlapping communication: per-rank summary, top signatures."""
    from traceql.commands.detect import detect as run_detect
    from traceql.export.files import write_frame

    with spinner("detecting…"):
        result = run_detect(files or None, baseline=baseline or None, threshold=threshold, top=top,
                            metrics=metrics or None, hta_compat=hta_compat, single_trace=single_trace)
    for text in result.notes:
        note(text)
    if out is not None:
        write_frame(result.kernels, out, OUT_FORMATS.get(out.suffix.lower(), "parquet"))
        note(f"wrote {result.kernels.height} kernel rows to {out}")
    if fmt is Format.json:
        emit_json(result.to_dict())
    else:
        print_detect(result)


def print_detect(result: Any) -> None:
    """The human form of :class:`traceql.labelling.DetectResult`, laid out for 80 columns."""
    how = {"baseline": "paired labels, against the isolated run given",
           "inrun": "in-run labels, against the trace's isolated steps",
           "detector": "single-trace labels, by SlowdownDetector (no reference)"}.get(result.mode, "no GPU kernels")
    console.print(f"[bold]Slowdown detection[/bold]: {how}")
    if result.match_rate is not None:
        console.print(f"baseline signature match: {result.match_rate:.1%} of compute kernels")
    kinds = result.baseline_kinds()
    if kinds.get("twin"):
        ref = kinds.get("reference", 0)
        console.print(f"twins: {kinds['twin']:,} kernels; no twin: {kinds.get('none', 0):,} (not cases)"
                      + (f"; isolated steps: {ref:,}" if ref else ""))
    elif kinds.get("estimate"):
        ref = kinds.get("reference", 0)
        console.print(f"estimates: {kinds['estimate']:,} kernels; no reference: {kinds.get('none', 0):,} "
                      "(not cases)" + (f"; isolated steps: {ref:,}" if ref else ""))
    elif kinds.get("key-median"):
        console.print(f"no steps to align: key medians for {kinds['key-median']:,} kernels; "
                      f"no match: {kinds.get('none', 0):,} (not cases)")
    for (run_id,), rows in result.ranks.group_by("run_id", maintain_order=True):
        ranks = table(f"Per rank of {run_id} (times in ms)", ("rank", "overlap", "compute", "comm", "memory", "idle",
                                                               "span", "cases", "time lost"))
        for r in rows.iter_rows(named=True):
            pct = "-" if r["comm_comp_overlap_pct"] is None else f"{r['comm_comp_overlap_pct']:.2f} %"
            ranks.add_row(str(r["rank"]), pct, *(num_ms(r[c]) for c in ("compute_ns", "comm_ns", "memory_ns",
                                                                         "idle_ns", "span_ns")),
                          f"{r['cases']:,}", num_ms(r["time_lost_ns"]))
        console.print(ranks)
    totals = result.to_dict()["totals"]
    console.print(f"[bold]{totals['cases']:,}[/bold] slowdown cases among {totals['compute_kernels']:,} compute "
                  f"kernels; time lost {ms(totals['time_lost_ns'])}")
    if result.top_signatures.is_empty():
        console.print("No slowdown cases.")
        return
    top = table("Top slowed signatures (by time lost)", ("kernel, grid / block", "cases", "ratio", "lost ms",
                                                          "next to"), wrap={"kernel, grid / block"})
    for t in result.top_signatures.iter_rows(named=True):
        shape = t["signature"][len(t["short_name"]):].strip()
        top.add_row(f"{display_name(t['name'], t['short_name'])}\n  {shape}", f"{t['cases']:,}/{t['instances']:,}",
                    f"{t['median_ratio']:.2f}x", num_ms(t["time_lost_ns"]), t["concurrent_comm"] or "-")
    console.print(top)
    console.print("cases: slowed / all instances; ratio: median slowdown of the cases")
