"""`traceql profile memory | compute | buckets | merge`: the profile files `traceql solve` reads."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from traceql.analyzers.units import parse_size
from traceql.cli.common import CONTEXT, console, guarded, spinner, table
from traceql.cli.say import notes as show_notes
from traceql.errors import OptionError

app = typer.Typer(help="Profile a model for `traceql solve`: memory, compute, DDP buckets; merge nodes' folders.",
                  no_args_is_help=True, context_settings=CONTEXT)

InputDir = Annotated[Path, typer.Argument(help="the input folder (define_model.py, local_config.json …)",
                                          show_default=False)]
OutDir = Annotated[Path, typer.Option("--out", "-o", help="the profile folder (created; files named by kind and GPU)")]


def _size(text: str) -> int:
    """``4GB``, ``512MiB``, ``1e9`` as bytes: a finite size of at least one byte."""
    try:
        return parse_size(text)
    except ValueError as err:
        raise OptionError(f"--memory-limit {text!r}: {err}") from None


def _show(path: Path) -> None:
    data = json.loads(path.read_text())
    cols = {"memory": ("batch", "fits", "peak MB", "virtual workers"),
            "compute": ("batch", "forward ms", "backward ms", "optimizer ms", "step ms")}[data["kind"]]
    out = table(f"{data['kind'].capitalize()} of {data['model']} on {data['gpu']}", cols)
    for r in data["batches"]:
        if data["kind"] == "memory":
            peak = "-" if r["peak_bytes"] is None else f"{r['peak_bytes'] / 1e6:,.1f}"
            out.add_row(str(r["batch"]), "yes" if r["fits"] else "no", peak, str(r["virtual_workers"]))
        else:
            step = r["forward_ms"] + r["backward_ms"] + r["optimizer_ms"]
            out.add_row(str(r["batch"]), *(f"{r[c]:,.3f}" for c in ("forward_ms", "backward_ms", "optimizer_ms")),
                        f"{step:,.3f}")
    console.print(out)
    if data["kind"] == "memory":
        console.print(f"largest batch that fits: {data['max_batch']} (limit {data['limit_bytes'] / 1e6:,.1f} MB)")
        console.print(f"weights, gradients and optimizer state: {data['static_bytes'] / 1e6:,.1f} MB")
    console.print(f"wrote {escape(str(path))}")


def _measure(what: str, run: Callable[..., Path], *args: Any, **kwargs: Any) -> None:
    """Run one profiler (``run``) with a spinner showing its progress, then show what it wrote."""
    from traceql.collecting import collect_errors

    with spinner(f"profiling {what}…") as update, collect_errors():
        path = run(*args, progress=update, **kwargs)
    _show(path)


@app.command("memory", epilog="Example:\n\n  traceql profile memory my_model/ --out profiles")
@guarded
def memory(
    input_dir: InputDir,
    out: OutDir = Path("profiles"),
    memory_limit: Annotated[str | None, typer.Option(
        "--memory-limit", help="bound the search (4GB, 512MiB); needed on CPU; default: the GPU's memory")] = None,
    max_batch: Annotated[int, typer.Option("--max-batch", help="the largest batch tried", min=1)] = 1024,
) -> None:
    """The largest local batch that fits on this GPU, and the virtual workers that fit at each batch."""
    from traceql.commands.profile import memory as run

    _measure("memory", run, input_dir, out, memory_limit=_size(memory_limit) if memory_limit else None,
             max_batch=max_batch)


@app.command("compute", epilog="Example:\n\n  traceql profile compute my_model/ --out profiles")
@guarded
def compute(
    input_dir: InputDir,
    out: OutDir = Path("profiles"),
    batches: Annotated[str | None, typer.Option(
        "--batches", help="local batches to time, 1,2,4 (default: those the memory profile found fitting)")] = None,
    iterations: Annotated[int, typer.Option("--iterations", help="timed steps per batch", min=1)] = 10,
    warmup: Annotated[int, typer.Option("--warmup", help="untimed steps first", min=0)] = 3,
) -> None:
    """Forward, backward and optimizer time per local batch on this GPU."""
    from traceql.commands.profile import compute as run

    try:
        sizes = [int(x) for x in batches.split(",") if x.strip()] if batches else None
    except ValueError:
        raise OptionError(f"--batches {batches!r}: batch sizes such as 1,2,4,8") from None
    _measure("compute", run, input_dir, out, batches=sizes, warmup=warmup, iterations=iterations)


@app.command("buckets", epilog="Example:\n\n  traceql profile buckets runs/cap2 runs/cap25 --out profiles")
@guarded
def buckets(
    runs: Annotated[list[Path], typer.Argument(help="run folders of `traceql collect`, one per bucket_cap_mb",
                                               show_default=False)],
    out: OutDir = Path("profiles"),
    interconnect: Annotated[str | None, typer.Option(
        "--interconnect", help="what the ranks talked over (nvlink, pcie, network …); default: intra-node or "
                               "network, from the ranks' hosts")] = None,
) -> None:
    """DDP buckets and their all-reduce times, exposed communication and overlap tax per bucket_cap_mb."""
    from traceql.collecting import collect_errors
    from traceql.commands.profile import buckets as run

    with spinner("reading the runs…"), collect_errors():
        path, notes = run(runs, out, interconnect=interconnect)
    show_notes(notes)
    data = json.loads(path.read_text())
    out_table = table(f"Buckets of {data['model']} on {data['world_size']} x {data['gpu']}", (
        "cap MB", "buckets", "all-reduce ms", "exposed ms", "tax ms", "step ms", "batch"))
    for c in data["caps"]:
        def ms(v: float | None) -> str:
            return "-" if v is None else f"{v:,.3f}"

        wire = sum(c["allreduce_ms"]) if c["allreduce_ms"] else None
        out_table.add_row(f"{c['cap_mb']:g}", str(c["buckets"]), ms(wire), ms(c["exposed_comm_ms"]),
                          ms(c["overlap_tax_ms"]), ms(c["step_ms"]), str(c["batch"]))
    console.print(out_table)
    model = data["comm_model"]
    if model:
        console.print(f"all-reduce ≈ {model['latency_ms']:.4f} ms + {model['ms_per_mb']:.5f} ms/MB "
                      f"({model['samples']} buckets)")
    console.print("per step: exposed: comm no compute hid; tax: GPU time its slowdowns added")
    console.print(f"wrote {escape(str(path))}")


@app.command("merge", epilog="Example:\n\n  traceql profile merge node0/profiles node1/profiles --out profiles")
@guarded
def merge(
    folders: Annotated[list[Path], typer.Argument(help="profile folders of several nodes", show_default=False)],
    out: OutDir = Path("profiles"),
) -> None:
    """Gather several nodes' profile folders into one (the first of two files of one kind and GPU is kept)."""
    from traceql.collecting import collect_errors
    from traceql.commands.profile import merge as run

    with collect_errors():
        written, notes = run(folders, out)
    show_notes(notes)
    console.print(f"{len(written)} profile files in {escape(str(out))}: "
                  + ", ".join(escape(p.name) for p in written))
