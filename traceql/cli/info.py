"""`traceql info`: versions, GPUs, ranks, capture span, kernel counts, top kernels and collectives."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.markup import escape

from traceql.cli.common import Files, Format, FormatOption, console, emit_json, guarded, ms, num_ms, spinner, table
from traceql.cli.say import notes
from traceql.model.step_marker import described


@guarded
def info(
    files: Files = None,
    fmt: FormatOption = Format.table,
    top: Annotated[int, typer.Option(help="how many kernels to list by GPU time", min=1)] = 10,
) -> None:
    """Versions, GPUs, ranks, capture span, kernel counts, top kernels and collectives of a trace."""
    from traceql.commands.info import info as run_info

    with spinner("reading…"):
        summary = run_info(files or None, top=top)
    notes(summary["notes"], fmt)
    if fmt is Format.json:
        emit_json(summary)
    else:
        print_info(summary)


def print_info(info: dict[str, Any]) -> None:
    """The human form of :func:`traceql.commands.info.trace_info`."""
    metrics = info["kernel_metrics"]
    if not info["runs"] and metrics["launches"]:  # Nsight Compute metrics alone: no timeline to tabulate
        console.print(f"[bold]Nsight Compute metrics[/bold]: {metrics['launches']:,} profiled launches of "
                      f"{metrics['kernels']:,} kernels (SQL: kernel_metrics); no timeline (no runs, ranks or "
                      "kernels' times): give them to detect with --metrics, beside the trace they profiled")
        return
    runs = table("Runs", ("run_id", "path", "tool", "schema", "ranks"), left={"tool", "schema", "ranks"},
                 wrap={"run_id", "path"})
    for r in info["runs"]:
        runs.add_row(escape(r["run_id"]), escape(r["path"]), f"{r['source']} {r['tool_version'] or '?'}",
                     r["schema_version"] or "?", ",".join(map(str, r["ranks"])))
    console.print(runs)

    ranks = table("Ranks and GPUs", ("run_id", "rank", "pid", "rank from", "devices", "GPU", "span ms",
                                     "kernels"), left={"rank from", "devices"}, wrap={"run_id", "GPU"})
    gpu_names = {(g["run_id"], g["device"]): g["name"] or "unknown (the trace names none)" for g in info["gpus"]}
    for r in info["ranks"]:
        devs = r["devices"] or []
        names = sorted({gpu_names.get((r["run_id"], d), "?") for d in devs})
        ranks.add_row(escape(r["run_id"]), str(r["rank"]), str(r["pid"]), r["rank_from"], ",".join(map(str, devs)),
                      ", ".join(names), num_ms(r["span_ns"]), f"{r['kernels']:,}")
    console.print(ranks)

    k = info["kernels"]
    if metrics["launches"]:
        console.print(f"[bold]Nsight Compute metrics[/bold]: {metrics['launches']:,} profiled launches of "
                      f"{metrics['kernels']:,} kernels (SQL: kernel_metrics; give them to detect with --metrics)")
    if not k["total"]:
        console.print("[bold]Kernels[/bold]: none" + ("" if metrics["launches"] else
                                                      " — no GPU activity in these traces (a run on CPU?)"))
        return
    kinds = ", ".join(f"{name} {n:,}" for name, n in k["by_kind"].items())
    devices = ", ".join(f"device {d}: {n:,}" for d, n in k["by_device"].items())
    console.print(f"[bold]Kernels[/bold]: {k['total']:,} ({kinds}); {devices}; GPU time {ms(k['total_ns'])}")
    m = info["memcpy"]
    console.print(f"[bold]Memory operations[/bold]: {m['total']:,} "
                  f"({', '.join(f'{n} {c:,}' for n, c in m['by_kind'].items()) or 'none'}); "
                  f"[bold]NVTX ranges[/bold]: {info['nvtx']['total']:,}")
    console.print(f"[bold]Training steps[/bold]: {steps_line(info['steps'])}")

    top = table("Top kernels by GPU time", ("kernel", "kind", "count", "total ms", "mean ms", "% time"),
                left={"kind"}, wrap={"kernel"})
    for t in info["top_kernels"]:
        top.add_row(escape(t["kernel"]), t["kind"], f"{t['count']:,}", num_ms(t["total_ns"]), num_ms(t["mean_ns"]),
                    f"{t['pct']:.2f}")
    console.print(top)

    if not info["collectives"]:
        console.print("[bold]Collectives[/bold]: none (no NCCL/RCCL/HCCL kernels in this trace)")
        return
    coll = table("Collectives (communication kernels)", ("collective", "count", "total ms"), wrap={"collective"})
    for c in info["collectives"]:
        coll.add_row(escape(c["collective"] or "(unnamed)"), f"{c['count']:,}", num_ms(c["total_ns"]))
    console.print(coll)


def steps_line(steps: dict[str, Any]) -> str:
    """How many steps each rank ran, of which kinds, on how many ranks (``info``'s ``steps``)."""
    if not steps["total"]:
        return f"none (no {described()})"
    low, high = steps["per_rank"]
    each = f"{high:,}" if low == high else f"{low:,}-{high:,}"
    kinds = ", ".join(f"{kind} {n:,}" for kind, n in steps["steps_by_kind"].items())
    ranks = "1 rank" if steps["ranks"] == 1 else f"{steps['ranks']:,} ranks"
    return f"{each} a rank ({kinds}) on {ranks}"
