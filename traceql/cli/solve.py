"""`traceql solve`: the configuration with the least predicted iteration time for a global batch on a cluster,
the runner-ups, and the equal split it beats."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from traceql.cli.common import Format, FormatOption, console, counted, emit_json, guarded, table
from traceql.cli.say import notes


@guarded
def solve(
    profile_dir: Annotated[Path, typer.Argument(help="a folder of profiles (memory-, compute-, buckets-<gpu>.json)",
                                                metavar="PROFILE_DIR", show_default=False)],
    global_batch: Annotated[int, typer.Option("--global-batch", "-n", help="samples per iteration over the "
                                              "cluster", min=1, show_default=False)],
    cluster: Annotated[Path, typer.Option("--cluster", "-c", help='cluster file: {"nodes": [{"name", "gpu", '
                                          '"count"}, ...]}', show_default=False)],
    max_accumulation: Annotated[int, typer.Option("--max-accumulation", help="at most this many gradient "
                                                  "accumulation steps", min=1)] = 8,
    max_virtual: Annotated[int, typer.Option("--max-virtual", help="at most this many virtual workers per GPU",
                                             min=1)] = 4,
    top: Annotated[int, typer.Option("--top", help="how many runner-ups to list", min=0)] = 5,
    fmt: FormatOption = Format.table,
) -> None:
    """Pick the local batch and virtual workers per node, accumulation steps and bucket cap that minimise the
    predicted iteration time for a global batch on a (possibly mixed) cluster, from profile files."""
    from traceql.commands.solve import solve as run_solve

    result = run_solve(profile_dir, global_batch, cluster, max_accumulation=max_accumulation,
                       max_virtual=max_virtual, top=top)
    notes(result.notes, fmt)
    if fmt is Format.json:
        emit_json(result.to_dict())
    else:
        print_solve(result)


def _ms(config: Any) -> str:
    """The predicted iteration time; ``~`` when its communication is an estimate; ``-`` for no real time."""
    if not math.isfinite(config.time_ms) or config.time_ms <= 0:
        return "-"
    return f"{'~' if config.cap.estimated else ''}{config.time_ms:,.2f}"


def _rate(config: Any) -> str:
    """Samples per second; ``-`` where the time gives no finite rate."""
    try:
        rate = 1000 * config.global_batch / config.time_ms if config.time_ms > 0 else math.inf
    except OverflowError:
        rate = math.inf
    return f"{rate:,.1f}" if math.isfinite(rate) else "-"


def _cap(config: Any) -> str:
    return "-" if config.cap.cap_mb is None else f"{config.cap.cap_mb:g}"


def print_solve(result: Any) -> None:
    """The human form of :class:`traceql.commands.solve.SolveResult`, laid out for 80 columns."""
    best, gpus, count = result.best, sum(n.count for n in result.nodes), len(result.nodes)
    console.print(f"[bold]Best for a global batch of {result.global_batch:,}[/bold] on {counted(gpus, 'GPU')} "
                  f"({counted(count, 'node')}): {_ms(best)} ms, {_rate(best)} samples/s")
    cap = "no bucket cap, no communication" if best.cap.cap_mb is None else f"cap {_cap(best)} MB"
    console.print(f"accumulation {best.accumulation}, {cap}; compute {best.slowest[0]:,.2f} ms (the slowest node)",
                  highlight=False)
    if best.cap.cap_mb is not None:
        console.print(f"communication {'~' if best.cap.estimated else ''}{best.cap.comm_ms:,.2f} ms: exposed "
                      f"{best.cap.exposed_ms:,.2f} + overlap tax {best.cap.tax_ms:,.2f}", highlight=False)
    nodes = table(None, ("node", "gpu", "GPUs", "batch", "virtual", "samples", "compute ms"), wrap={"node", "gpu"})
    for n in best.nodes:
        nodes.add_row(escape(n.node.name), escape(n.node.gpu), str(n.node.count), str(n.batch), str(n.virtual),
                      f"{n.samples:,}", f"{n.compute_ms:,.2f}")
    console.print(nodes)
    _print_naive(result)
    if len(result.configs) > 1:
        _print_runner_ups(result.configs[1:])
    console.print("virtual: replicas per GPU sharing the weights, run in turn; ~: comm estimated",
                  highlight=False)


def _print_naive(result: Any) -> None:
    if result.naive is None:
        console.print(f"Equal split: not feasible ({result.naive_reason})", highlight=False)
        return
    naive = result.naive
    cap = "" if naive.cap.cap_mb is None else f", cap {_cap(naive)} MB"
    gain = result.gain_pct or 0.0
    than = "as fast" if abs(gain) < 0.05 else f"+{gain:,.1f} % samples/s"
    console.print(f"Equal split (batch {naive.nodes[0].batch} per GPU{cap}): {_ms(naive)} ms; the best: {than}",
                  highlight=False)


def _print_runner_ups(configs: list[Any]) -> None:
    out = table("Runner-ups", ("#", "iter ms", "samples/s", "accum", "cap MB", "replicas",
                               "batch x virtual per node"), wrap={"batch x virtual per node"})
    for i, c in enumerate(configs, start=2):
        out.add_row(str(i), _ms(c), _rate(c), str(c.accumulation), _cap(c), str(c.replicas),
                    ", ".join(f"{n.batch}x{n.virtual}" for n in c.nodes))
    console.print(out)
