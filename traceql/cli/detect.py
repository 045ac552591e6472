"""`traceql detect`: the compute kernels slowed by overlapping communication, per rank and by signature."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from traceql.analyzers.baselines.kinds import CONTAMINATED, ESTIMATED, NONE
from traceql.cli.causes import print_causes
from traceql.cli.common import (
    BaselineOption,
    Files,
    Format,
    FormatOption,
    HtaCompatOption,
    SchedulerOption,
    ThresholdOption,
    WorkersOption,
    console,
    counted,
    emit_json,
    guarded,
    ms,
    num_ms,
    progress_bar,
    table,
)
from traceql.cli.render import kernel_cell, print_ranks
from traceql.cli.say import kept, note, notes
from traceql.labelling.options import PAIRED_FACTOR, TOP


@guarded
def detect(
    files: Files = None,
    baseline: BaselineOption = None,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="write one row per compute kernel (.parquet, .csv or .json)")
    ] = None,
    fmt: FormatOption = Format.table,
    threshold: ThresholdOption = PAIRED_FACTOR,
    top: Annotated[int, typer.Option(help="how many slowed signatures to list", min=1)] = TOP,
    metrics: Annotated[
        list[Path] | None,
        typer.Option("--metrics", "-m", help="ncu CSV(s) of the same workload: adds ncu_* metrics to --out rows"),
    ] = None,
    hta_compat: HtaCompatOption = False,
    single_trace: Annotated[
        bool, typer.Option("--single-trace", help="label by the detector, hiding the trace's isolated steps")
    ] = False,
    workers: WorkersOption = 1,
    scheduler: SchedulerOption = None,
    causes: Annotated[bool, typer.Option(
        "--causes/--no-causes", help="replay the run for its causes and critical path (off: faster, lighter)")] = True,
) -> None:
    """Name the compute kernels slowed by overlapping communication: per-rank summary, top signatures."""
    from traceql.commands.cache import answered
    from traceql.commands.detect import detect as run_detect

    with answered() as made, progress_bar("detecting…") as update:
        result = run_detect(files or None, baseline=baseline or None, threshold=threshold, top=top,
                            metrics=metrics or None, hta_compat=hta_compat, single_trace=single_trace, out=out,
                            workers=workers, scheduler=scheduler, progress=update, causes=causes)
    kept(made, fmt)
    notes(result.notes, fmt)
    if out is not None and fmt is not Format.json:  # in JSON, nothing beside the JSON
        note(f"wrote {result.compute_kernels():,} kernel rows to {out}")
    if fmt is Format.json:
        emit_json(result.to_dict())
    else:
        print_detect(result)


def print_detect(result: Any) -> None:
    """The human form of :class:`traceql.labelling.result.DetectResult`, laid out for 80 columns."""
    from traceql.analyzers.causes import held_phrase

    console.print(f"[bold]Slowdown detection[/bold]: {result.source.sentence}")
    for run_id in result.causes["run_id"].unique(maintain_order=True).to_list():
        print_causes(result.causes, run_id)
    if result.match_rate is not None:
        console.print(f"baseline signature match: {result.match_rate:.1%} of compute kernels")
    _print_baselines(result.baseline_kinds())
    _print_references(result.reference_kinds())
    if result.metrics_match_rate is not None:
        _print_metrics(result)
    for (run_id,), rows in result.ranks.group_by("run_id", maintain_order=True):
        print_ranks(run_id, rows)
    totals = result.to_dict()["totals"]
    console.print(f"[bold]{totals['cases']:,}[/bold] slowdown cases among {totals['compute_kernels']:,} compute "
                  f"kernels; {ms(totals['time_lost_ns'])} lost over all ranks{held_phrase(result.held)}")
    if totals["undecided"]:
        console.print(f"{totals['undecided']:,} undecided (overlapped, with no reference or a contaminated one: "
                      f"is_slowdown null in --out); {totals['decided_share']:.1%} of the overlapped kernels decided")
    critical = result.critical_path()
    if critical["critical_path_ns"] is not None and totals["cases"]:
        steps = int(result.critical["steps"].sum())
        share = "" if critical["critical_path_share"] is None else f" ({critical['critical_path_share']:.1%})"
        console.print(f"on the critical path: {ms(critical['critical_path_ns'])} of the "
                      f"{ms(critical['critical_lost_ns'])} lost in {counted(steps, 'normal step')}{share}: what "
                      "those steps would be shorter without the contention (traceql whatif)")
    console.print("lost: GPU time the slowdowns added; lost %: its share of the rank's step time")
    _print_steps(result.steps)
    if result.top_signatures.is_empty():
        console.print("No slowdown cases.")
        return
    _print_top(result.top_signatures)
    console.print("Next: traceql report (same inputs) -o report.html draws the worst step; "
                  "--out cases.parquet keeps every kernel.")


def _print_baselines(kinds: dict[str, int]) -> None:
    ref = kinds.get("reference", 0)
    own = f"; isolated steps: {ref:,}" if ref else ""
    if kinds.get("twin"):
        console.print(f"twins: {kinds['twin']:,} kernels; no twin: {kinds.get('none', 0):,} (not cases){own}")
    elif kinds.get("estimate") and own:
        console.print(f"isolated steps: {ref:,} kernels (a reference, hidden from the detector)")
    elif kinds.get("key-median"):
        console.print(f"no steps to align: key medians for {kinds['key-median']:,} kernels; "
                      f"no match: {kinds.get('none', 0):,} (not cases)")


def _print_references(kinds: dict[str, dict[str, int]]) -> None:
    """How good the detector's references were, and what a contaminated one means."""
    if not any(k in kinds for k in ESTIMATED):
        return
    parts = [f"{k} {kinds[k]['kernels']:,}" for k in (*ESTIMATED, NONE) if k in kinds]
    console.print("references: " + ", ".join(parts))
    bad = kinds.get(CONTAMINATED)
    if bad:
        console.print(f"{bad['kernels']:,} kernels judged on a contaminated reference: {bad['cases']:,} cases, "
                      "the rest undecided")


def _print_metrics(result: Any) -> None:
    """What the Nsight Compute metrics add: the SM and memory throughput of the cases against the others."""
    k = result.kernels
    line = f"Nsight Compute: {result.metrics_match_rate:.1%} of the profiled launches matched a kernel"
    if "ncu_sm_throughput_pct" in k.columns and k["ncu_sm_throughput_pct"].drop_nulls().len():
        case = k["is_slowdown"]
        sm = [k["ncu_sm_throughput_pct"].filter(m).median() for m in (case, ~case)]
        mem = [k["ncu_memory_throughput_pct"].filter(m).median() for m in (case, ~case)]
        if None not in sm + mem:
            line += (f"; median SM throughput {sm[0]:.0f} % for the cases, {sm[1]:.0f} % for the others; "
                     f"memory {mem[0]:.0f} % / {mem[1]:.0f} % (per kernel: --out)")
    console.print(line)


def _print_steps(steps: Any) -> None:
    """Time lost per step, summed over each run's ranks: all of them up to 10, else the 5 worst."""
    import polars as pl

    runs = steps["run_id"].unique(maintain_order=True).to_list() if not steps.is_empty() else []
    shown_first = False
    for run_id in runs:
        per = (steps.filter(pl.col("run_id") == run_id).group_by("step").agg(pl.col("time_lost_ns").sum())
               .sort("step"))
        first = per["step"].min()
        shown = per if per.height <= 10 else per.sort("time_lost_ns", descending=True).head(5).sort("step")
        what = "per step" if per.height <= 10 else f"the 5 worst of {per.height} steps"
        whose = f"{escape(run_id)}: " if len(runs) > 1 else ""
        items = ", ".join(f"{s}{'*' if s == first else ''}:{num_ms(v)}" for s, v in shown.iter_rows())
        console.print(f"{whose}ms lost {what} (over ranks): {items}")
        shown_first |= first in shown["step"].to_list()
    if shown_first:
        console.print("*: the first captured step (each rank's capture began at its own moment): shown, not a "
                      "normal step")


def _print_top(top_signatures: Any) -> None:
    runs = top_signatures["run_id"].n_unique() > 1
    cols = (("run",) if runs else ()) + ("kernel, grid / block", "cases", "ratio", "lost ms", "next to")
    top = table("Top slowed signatures (by time lost)", cols, wrap={"run", "kernel, grid / block"})
    for t in top_signatures.iter_rows(named=True):
        top.add_row(*((escape(t["run_id"]),) if runs else ()), kernel_cell(t),
                    f"{t['cases']:,}/{t['instances']:,}", f"{t['median_ratio']:.2f}x", num_ms(t["time_lost_ns"]),
                    t["concurrent_comm"] or "-")
    console.print(top)
    console.print("cases: slowed / all instances; ratio: median slowdown of the cases")
