"""`traceql diff`: what changed between two runs of the same model, kernels paired by step alignment."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from traceql.cli.common import (
    Format,
    FormatOption,
    console,
    counted,
    emit_json,
    fail,
    guarded,
    num_ms,
    progress_bar,
    table,
)
from traceql.cli.render import LONG_SPAN_NS, kernel_cell
from traceql.cli.say import notes
from traceql.labelling.modes import LabelSource
from traceql.labelling.options import NO_CHANGE_PCT, finite

REGRESSED = 1  # the exit code of --fail-above
Before = Annotated[Path, typer.Argument(help="the earlier run: a trace file or a folder of one run's traces",
                                         metavar="BEFORE", show_default=False)]
After = Annotated[Path, typer.Argument(help="the later run, compared with BEFORE", metavar="AFTER", show_default=False)]


@guarded
def diff(
    before: Before,
    after: After,
    fmt: FormatOption = Format.table,
    top: Annotated[int, typer.Option(help="rows of the kernel tables", min=1)] = 10,
    fail_above: Annotated[
        float | None,
        typer.Option("--fail-above", metavar="PCT",
                     help="exit 1 when the mean step time, or its 90th percentile, regressed by more than PCT "
                          "percent"),
    ] = None,
    tolerance: Annotated[
        float, typer.Option(metavar="PCT", help="a step time change within ±PCT % is 'no change'", min=0.0)
    ] = NO_CHANGE_PCT,
) -> None:
    """Compare AFTER with BEFORE: step time, per-rank breakdown, labels, kernels paired by step alignment."""
    from traceql.commands.diff import diff as run_diff

    finite(fail_above, "--fail-above")
    with progress_bar("comparing…"):
        result = run_diff(before, after, tolerance=tolerance)
    notes(result.notes, fmt)
    if fmt is Format.json:
        emit_json(result.to_dict())
    else:
        print_diff(result, top)
    if fail_above is not None and result.verdict == "unknown":
        raise fail(f"--fail-above {fail_above:g} %: no step time to judge ({verdict_line(result)})", REGRESSED)
    if fail_above is not None and result.fails(fail_above):
        raise fail(f"step time {_changes(result.step_time)} is a regression above --fail-above {fail_above:g} %",
                   REGRESSED)


def print_diff(result: Any, top: int) -> None:
    """The human form of :class:`traceql.commands.diff.DiffResult`, laid out for 80 columns."""
    runs, st = result.runs, result.step_time
    for side in ("before", "after"):
        r = runs[side]
        console.print(f"[bold]{side}[/bold]: {escape(r['path'])} ({LabelSource.of(r['mode']).short}, "
                      f"{counted(r['ranks'], 'rank')}, {counted(r['steps'], 'step')})", overflow="fold")
    if st["basis"] == "step":
        console.print(f"step time (each normal step's longest rank GPU time), over {st['steps_before']:,} -> "
                      f"{st['steps_after']:,} normal steps:")
        console.print(f"  mean {num_ms(st['before_ns'])} -> {num_ms(st['after_ns'])} ms ({_pct(st['change_pct'])}); "
                      f"p90 {num_ms(st['p90_before_ns'])} -> {num_ms(st['p90_after_ns'])} ms "
                      f"({_pct(st['p90_change_pct'])})")
        console.print(f"  slowest: step {st['slowest_step_before']} {num_ms(st['slowest_ns_before'])} ms -> step "
                      f"{st['slowest_step_after']} {num_ms(st['slowest_ns_after'])} ms")
    else:
        console.print(f"median rank span: {num_ms(st['before_ns'])} -> {num_ms(st['after_ns'])} ms "
                      f"({_pct(st['change_pct'])})")
    _print_ranks(result.ranks, st["basis"] == "step")
    b, a = runs["before"], runs["after"]
    console.print(f"overlap {_overlap(b['overlap_pct'])} -> {_overlap(a['overlap_pct'])}; cases {b['cases']:,} -> "
                  f"{a['cases']:,}; time lost {num_ms(b['time_lost_ns'])} -> {num_ms(a['time_lost_ns'])} ms "
                  "(whole runs)")
    _print_kernels(result, top)
    console.print(f"[bold]verdict[/bold]: {verdict_line(result)}")


def verdict_line(result: Any) -> str:
    st, tol = result.step_time, result.tolerance_pct
    change, tail = st["change_pct"], st["p90_change_pct"]
    if change is None:
        return "no step time to compare: unknown"
    if st["basis"] == "span":
        return "no normal steps: the spans time the captures, not the work: unknown"
    worst = max(change, tail if tail is not None else change)
    how = "after is slower" if worst > 0 else "after is faster" if change < 0 else "the same"
    return f"step time {_changes(st)} ({how}; tolerance ±{tol:g} %): {result.verdict}"


def _changes(st: dict[str, Any]) -> str:
    """The step time's changes: mean, and 90th percentile where the runs have steps."""
    if st["p90_change_pct"] is None:
        return _pct(st["change_pct"])
    return f"mean {_pct(st['change_pct'])}, p90 {_pct(st['p90_change_pct'])}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.2f} %"


def _overlap(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} %"


def _print_ranks(ranks: Any, per_step: bool) -> None:
    times = ("compute_ns", "comm_ns", "memory_ns", "idle_ns", "time_lost_ns")
    longest = max((ranks[f"{c}_{s}"].max() or 0 for c in times for s in ("before", "after")), default=0)
    unit, scale = ("s", 1e3) if longest >= LONG_SPAN_NS else ("ms", 1.0)
    what = "per normal step, " if per_step else ""
    out = table(f"Per rank ({what}times in {unit})", ("rank", "run", "overlap", "compute", "comm", "memory", "idle",
                                                      "cases", "lost"), left={"run"})
    for r in ranks.iter_rows(named=True):
        for side in ("before", "after"):
            cases = r[f"cases_{side}"]
            out.add_row(str(r["rank"]) if side == "before" else "", side, _overlap(r[f"comm_comp_overlap_pct_{side}"]),
                        *(num_ms(None if r[f"{c}_{side}"] is None else r[f"{c}_{side}"] / scale) for c in times[:4]),
                        "-" if cases is None else f"{cases:,.1f}" if per_step else f"{cases:,}",
                        num_ms(r[f"time_lost_ns_{side}"]))
    console.print(out)
    console.print("lost: GPU time the slowdowns added (ms), as traceql detect labels each run")


def _print_kernels(result: Any, top: int) -> None:
    k, totals = result.kernels, result.kernel_totals()
    if k.is_empty() and result.new.is_empty():
        console.print("No kernels paired (no normal steps to align).")
        return
    out = table(f"Kernels paired by step alignment ({min(top, k.height)} of {k.height}, by |delta|)",
                ("kernel, grid / block", "n", "before ms", "after ms", "delta ms", "delta"),
                wrap={"kernel, grid / block"})
    for r in k.head(top).iter_rows(named=True):
        out.add_row(kernel_cell(r), f"{r['instances']:,}", num_ms(r["before_ns"]), num_ms(r["after_ns"]),
                    num_ms(r["delta_ns"]), _pct(r["delta_pct"]))
    console.print(out)
    console.print(f"paired: {totals['paired']:,} kernels, {num_ms(totals['paired_before_ns'])} -> "
                  f"{num_ms(totals['paired_after_ns'])} ms; new in after: {totals['new']:,} "
                  f"({num_ms(totals['new_ns'])} ms); removed: {totals['removed']:,} "
                  f"({num_ms(totals['removed_ns'])} ms)")
    console.print("before, after: each kernel's median over its run's steps at its place in the step, summed")
    if result.new.height or result.removed.height:
        changed = table(f"New and removed kernels (up to {top} each, by time)", ("change", "kernel, grid / block",
                                                                                  "n", "ms"),
                        left={"change"}, wrap={"kernel, grid / block"})
        for what, frame, col in (("new", result.new, "after_ns"), ("removed", result.removed, "before_ns")):
            for r in frame.head(top).iter_rows(named=True):
                changed.add_row(what, kernel_cell(r), f"{r['instances']:,}", num_ms(r[col]))
        console.print(changed)
