"""`traceql collectives`: each collective of a step with its size, bus bandwidth and arrival skew."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from traceql.analyzers.units import size
from traceql.cli.common import Files, Format, FormatOption, console, counted, emit_json, guarded, spinner, table
from traceql.cli.say import notes


@guarded
def collectives(
    files: Files = None,
    fmt: FormatOption = Format.table,
    steps: Annotated[bool, typer.Option("--steps", help="also each step: its skew and the rank that arrived "
                                                        "last")] = False,
    gradients: Annotated[Path | None, typer.Option(
        "--gradients", metavar="FILE", help="the model's gradient sizes (JSON: param_bytes, bucket_cap_mb): "
                                            "DDP buckets for a run that records no size")] = None,
    top: Annotated[int, typer.Option("--top", metavar="N", min=0, help="only the N instances of a step that "
                                                                       "took longest (0: all)")] = 0,
) -> None:
    """Collectives: size, algorithm, bus bandwidth against the link's peak, arrival skew and the last rank."""
    from traceql.commands.collectives import collectives as run_collectives

    with spinner("reading the collectives…"):
        result = run_collectives(files or None, gradients=gradients)
    notes(result.notes, fmt)
    if fmt is Format.json:
        emit_json(result.to_dict())
        return
    if not result.runs:
        console.print("[bold]Collectives[/bold]: none in the normal steps of these traces")
    positions, by_step, totals = result.positions, result.steps, result.totals
    for run in result.runs:
        _print_totals(run["run_id"], totals.filter(totals["run_id"] == run["run_id"]).to_dicts())
        _print_run(run, positions.filter(positions["run_id"] == run["run_id"]).to_dicts(), top)
        if steps:
            _print_steps(run["run_id"], by_step.filter(by_step["run_id"] == run["run_id"]).to_dicts())


def _us(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1e3:,.1f}"


def _print_totals(run_id: str, rows: list[dict[str, Any]]) -> None:
    out = table(f"Per collective of {escape(run_id)}: every rank's kernels, their total and its share of the "
                "run's GPU time, a kernel's mean, least, most and spread (std-dev)",
                ("collective", "kernels", "total ms", "GPU %", "mean us", "min us", "max us", "std us"),
                left={"collective"}, wrap={"collective"})
    for r in rows:
        out.add_row(escape(r["collective"].replace("/", " ", 1)), f"{r['kernels']:,}", f"{r['total_ns'] / 1e6:,.3f}",
                    "-" if r["gpu_share"] is None else f"{100 * r['gpu_share']:.1f}", _us(r["mean_ns"]),
                    _us(r["min_ns"]), _us(r["max_ns"]), _us(r["std_ns"]))
    console.print(out)


def _longest(rows: list[dict[str, Any]], top: int) -> list[dict[str, Any]]:
    """The ``top`` rows whose median transfer took longest, in their order (all where ``top`` is 0)."""
    if not top or top >= len(rows):
        return rows
    kept = sorted(range(len(rows)), key=lambda i: -(rows[i]["transfer_ns"] or 0))[:top]
    return [rows[i] for i in sorted(kept)]


def _print_run(run: dict[str, Any], rows: list[dict[str, Any]], top: int = 0) -> None:
    peak = f"{run['link']}, {run['link_peak_gbps']:g} GB/s a way" if run["link"] else "link unknown"
    sizes = ", ".join(run["size_from"]) or "none recorded"
    console.print(f"[bold]Collectives[/bold] of {escape(run['run_id'])}: {counted(run['ranks'], 'rank')}, "
                  f"{run['instances']:,} instances; {escape(run['gpu'] or 'GPU unnamed')} ({peak}); "
                  f"sizes: {sizes}; busbw in GB/s (nccl-tests), its share of the peak, transfer and skew "
                  "medians over the steps, the rank last most often")
    shown = _longest(rows, top)
    out = table(None, ("#", "collective", "size", "steps", "xfer us", "busbw", "peak", "skew us", "last"),
                left={"collective", "last"}, wrap={"collective"})
    for r in shown:
        share = "-" if r["peak_share"] is None else f"{100 * r['peak_share']:.0f}%"
        busbw = "-" if r["busbw_gbps"] is None else f"{r['busbw_gbps']:,.1f}"
        out.add_row(str(r["instance"]), escape(r["collective"].replace("/", " ", 1)), size(r["bytes"]),
                    str(r["steps"]), _us(r["transfer_ns"]), busbw, share, _us(r["skew_ns"]),
                    "-" if r["last_rank"] is None else f"{r['last_rank']} ({r['last_count']}/{r['steps']})")
    console.print(out)
    if len(shown) < len(rows):
        console.print(f"the {len(shown)} of {len(rows)} that took longest (--top {top}; --top 0: all)")


def _print_steps(run_id: str, rows: list[dict[str, Any]]) -> None:
    out = table(f"Steps of {escape(run_id)}", ("step", "instances", "skew ms", "held ms", "last rank"))
    for r in rows:
        out.add_row(str(r["step"]), str(r["instances"]), f"{r['skew_ns'] / 1e6:,.3f}", f"{r['held_ns'] / 1e6:,.3f}",
                    str(r["last_rank"]))
    console.print(out)
