"""The `traceql` command line: each command parses options, calls one library function, renders it."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from contextlib import nullcontext as _nullcontext
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console

from traceql import render
from traceql.errors import TraceqlError

app = typer.Typer(
    help="Trace analysis and slowdown detection for distributed PyTorch training.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
console = Console() if sys.stdout.isatty() else Console(width=160)
T = TypeVar("T")


class InfoFormat(str, Enum):
    table = "table"
    json = "json"


class FrameFormat(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"
    parquet = "parquet"


def _guard(fn: Callable[[], T]) -> T:
    """Run a command body; a TraceqlError becomes one line on stderr and its exit code."""
    try:
        return fn()
    except TraceqlError as err:
        sys.stderr.write(f"error: {err}\n")
        raise typer.Exit(err.exit_code) from None
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        raise typer.Exit(130) from None
    except typer.Exit:
        raise
    except Exception as exc:  # a bug, not bad input: one line, unless TRACEQL_DEBUG asks for the traceback
        if os.environ.get("TRACEQL_DEBUG"):
            raise
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        sys.stderr.write(f"error: internal error ({type(exc).__name__}: {first}); "
                         "rerun with TRACEQL_DEBUG=1 for the traceback and please report it\n")
        raise typer.Exit(70) from None


def _emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


Files = Annotated[
    list[Path] | None,
    typer.Argument(help="nsys SQLite exports or folders of them (default: the embedded example trace)",
                   show_default=False),
]


@app.command()
def info(
    files: Files = None,
    fmt: Annotated[InfoFormat, typer.Option("--format", "-f", help="table or json")] = InfoFormat.table,
    top: Annotated[int, typer.Option(help="how many kernels to list by GPU time", min=1)] = 10,
) -> None:
    """Versions, GPUs, ranks, capture span, kernel counts, top kernels and collectives of a trace."""

    def body() -> None:
        from traceql.info import trace_info
        from traceql.trace import read_trace

        with read_trace(files) as trace:
            summary = trace_info(trace, top=top)
        if fmt is InfoFormat.json:
            _emit_json(summary)
        else:
            render.print_info(console, summary)

    _guard(body)


@app.command()
def query(
    args: Annotated[list[str], typer.Argument(metavar="[FILE]... SQL", help="trace files, then the SQL")],
    fmt: Annotated[FrameFormat, typer.Option("--format", "-f", help="table, csv, json or parquet")] = FrameFormat.table,
    out: Annotated[Path | None, typer.Option("--output", "-o", help="write the result to this file")] = None,
    limit: Annotated[int, typer.Option(help="rows shown in table format", min=1)] = 50,
) -> None:
    """Run SQL over the normalized relations: runs, ranks, kernels, memcpy, nvtx, gpus."""

    def body() -> None:
        from traceql import output
        from traceql.query import run_query

        *paths, sql = args
        df = run_query([Path(p) for p in paths], sql)
        if out is not None:
            output.write_frame(df, out, "parquet" if fmt is FrameFormat.table else fmt.value)
            sys.stderr.write(f"wrote {df.height} rows to {out}\n")
        elif fmt is FrameFormat.table:
            render.print_frame(console, df, limit=limit)
        elif fmt is FrameFormat.parquet:
            raise TraceqlError("parquet is binary: give --output PATH")
        else:
            sys.stdout.buffer.write(output.frame_bytes(df, fmt.value))

    _guard(body)


@app.command()
def detect(
    files: Files = None,
    baseline: Annotated[
        list[Path] | None,
        typer.Option("--baseline", "-b", help="isolated run(s) of the same model and shapes (paired labels)"),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="write one row per compute kernel (.parquet, .csv or .json)")
    ] = None,
    fmt: Annotated[InfoFormat, typer.Option("--format", "-f", help="table or json")] = InfoFormat.table,
    threshold: Annotated[float, typer.Option(help="slowdown ratio that makes a case", min=1.0)] = 1.2,
    top: Annotated[int, typer.Option(help="how many slowed signatures to list", min=1)] = 10,
    metrics: Annotated[
        list[Path] | None,
        typer.Option("--metrics", "-m", help="ncu CSV(s) of the same workload: adds ncu_* metrics to --out rows"),
    ] = None,
    hta_compat: Annotated[
        bool, typer.Option("--hta-compat", help="per-rank breakdown as Holistic Trace Analysis 0.5.0 computes it")
    ] = False,
) -> None:
    """Name the compute kernels slowed by overlapping communication: per-rank summary, top signatures."""

    def body() -> None:
        from traceql import output
        from traceql.detect import detect as run_detect

        with console.status("detecting…", spinner="dots") if sys.stderr.isatty() else _nullcontext():
            result = run_detect(files or None, baseline=baseline or None, threshold=threshold, top=top,
                                metrics=metrics or None, hta_compat=hta_compat)
        for note in result.notes:
            sys.stderr.write(note + "\n")
        if out is not None:
            kind = {".csv": "csv", ".json": "json"}.get(out.suffix.lower(), "parquet")
            output.write_frame(result.kernels, out, kind)
            sys.stderr.write(f"wrote {result.kernels.height} kernel rows to {out}\n")
        if fmt is InfoFormat.json:
            _emit_json(result.to_dict())
        else:
            render.print_detect(console, result)

    _guard(body)


def _overrides(items: list[str] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise TraceqlError(f"--set {item!r}: expected KEY=VALUE, e.g. --set cap_size=2")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def _ranks(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise TraceqlError(f"--ranks {text!r}: expected rank numbers such as 0 or 0,2") from None


@app.command()
def collect(
    input_dir: Annotated[Path, typer.Argument(help="folder with define_model.py, local_config.json")],
    profiler: Annotated[str, typer.Option("--profiler", "-p", help="nsys, ncu, torch or none")] = "none",
    out: Annotated[Path | None, typer.Option("--out", "-o", help="run folder (runs/NAME-PROFILER-TIME)")] = None,
    steps: Annotated[int, typer.Option(help="profiled steps in the middle of the last epoch (nsys, ncu)")] = 5,
    ranks: Annotated[str | None, typer.Option(help="ranks to profile, e.g. 0 or 0,4 (default all)")] = None,
    device: Annotated[str, typer.Option(help="auto, cuda (NCCL) or cpu (gloo)")] = "auto",
    timeout: Annotated[float | None, typer.Option(help="seconds before the whole run is stopped")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", help="override local_config: --set cap_size=2")] = None,
    nsys_trace: Annotated[str, typer.Option(help="nsys -t")] = "cuda,nvtx",
    nsys_args: Annotated[str, typer.Option(help="more nsys profile options")] = "-s none --cpuctxsw none",
    ncu_kernel: Annotated[str | None, typer.Option(help="ncu: profile kernels whose name matches this regex")] = None,
    ncu_launch_skip: Annotated[int, typer.Option(help="ncu --launch-skip (within the window)")] = 0,
    ncu_launch_count: Annotated[int, typer.Option(help="ncu --launch-count")] = 50,
    ncu_args: Annotated[str, typer.Option(help="more ncu options")] = "",
    torch_wait: Annotated[int, typer.Option(help="torch.profiler schedule wait")] = 1,
    torch_warmup: Annotated[int, typer.Option(help="torch.profiler schedule warmup")] = 1,
    torch_active: Annotated[int, typer.Option(help="torch.profiler schedule active")] = 3,
    torch_repeat: Annotated[int, typer.Option(help="torch.profiler schedule repeat")] = 1,
    torch_skip_first: Annotated[int, typer.Option(help="torch.profiler schedule skip_first")] = 0,
    launcher: Annotated[str, typer.Option(help="torchrun, or env: ranks started by mpirun/srun")] = "torchrun",
    nnodes: Annotated[int, typer.Option(help="nodes (torchrun rendezvous)")] = 1,
    node_rank: Annotated[int, typer.Option(help="this node's rank (torchrun)")] = 0,
    rdzv_endpoint: Annotated[str | None, typer.Option(help="torchrun rendezvous HOST:PORT")] = None,
    rdzv_id: Annotated[str, typer.Option(help="torchrun rendezvous id")] = "traceql",
    rdzv_backend: Annotated[str, typer.Option(help="torchrun rendezvous backend")] = "c10d",
) -> None:
    """Run the training in INPUT_DIR on this node's GPUs (or CPUs) under a profiler; write a run folder."""

    def body() -> None:
        from collectors.errors import CollectError
        from collectors.launch import LaunchOptions
        from collectors.profilers import ProfilerOptions
        from traceql.collect import CollectFailed, run_collect

        try:
            opts = ProfilerOptions(
                name=profiler, steps=steps, nsys_trace=nsys_trace, nsys_args=nsys_args, ncu_kernel=ncu_kernel,
                ncu_launch_skip=ncu_launch_skip, ncu_launch_count=ncu_launch_count, ncu_args=ncu_args,
                torch_wait=torch_wait, torch_warmup=torch_warmup, torch_active=torch_active, torch_repeat=torch_repeat,
                torch_skip_first=torch_skip_first)
            launch = LaunchOptions(launcher=launcher, nnodes=nnodes, node_rank=node_rank, rdzv_endpoint=rdzv_endpoint,
                                   rdzv_id=rdzv_id, rdzv_backend=rdzv_backend, device=device, timeout=timeout,
                                   profile_ranks=_ranks(ranks))
        except CollectError as exc:  # an option collectors refuses (e.g. an unknown profiler)
            raise CollectFailed(str(exc), exc.detail, exc.exit_code) from None
        status = console.status("collecting…", spinner="dots") if sys.stderr.isatty() else _nullcontext()
        with status as live:
            def progress(text: str) -> None:
                if live is not None:
                    live.update(f"collecting… {text}")

            try:
                manifest = run_collect(input_dir, opts, out=out, launch=launch, overrides=_overrides(set_),
                                       progress=progress)
            except CollectFailed as exc:
                if exc.detail:
                    sys.stderr.write(exc.detail.rstrip() + "\n")
                raise
        render.print_manifest(console, manifest)

    _guard(body)


dataset_app = typer.Typer(help="Slowdown datasets: label runs and traces into one parquet dataset.",
                          no_args_is_help=True)
app.add_typer(dataset_app, name="dataset")


def _finish(outcomes: list[Any]) -> None:
    render.print_outcomes(console, outcomes)
    if any(o.status == "failed" for o in outcomes):
        raise typer.Exit(1)


@dataset_app.command("add")
def dataset_add(
    root: Annotated[Path, typer.Argument(help="dataset folder (created if missing)")],
    sources: Annotated[list[Path], typer.Argument(help="run folders or traces; each is one entry")],
    baseline: Annotated[list[Path] | None, typer.Option("--baseline", "-b", help="isolated run(s) to pair with; "
                                                         "each source gets the one it matches best")] = None,
    model: Annotated[str | None, typer.Option(help="model name (default: the run's input folder, or the trace)")]
    = None,
    config: Annotated[str | None, typer.Option(help="configuration name (default: from the run's config)")] = None,
) -> None:
    """Label run folders or traces and add one entry each; entries already there are skipped."""

    def body() -> None:
        from traceql.dataset import add

        with console.status("adding…") if sys.stderr.isatty() else _nullcontext() as live:
            outcomes = add(root, sources, baselines=baseline or [], model=model, config=config,
                           progress=(lambda p: live.update(f"adding {p}")) if live else None)
        _finish(outcomes)

    _guard(body)


@dataset_app.command("build")
def dataset_build(
    sweep: Annotated[Path, typer.Argument(help="SWEEP.json: inputs × a grid of local_config values")],
    out: Annotated[Path, typer.Option("--out", "-o", help="dataset folder")],
    collect_only: Annotated[bool, typer.Option(help="collect the runs, label nothing (run build again to label)")]
    = False,
) -> None:
    """Collect every configuration of a sweep (and its isolated run), label it, add it; resumable."""

    def body() -> None:
        from rich.progress import Progress

        from traceql.sweep import build

        with Progress(console=Console(stderr=True), disable=not sys.stderr.isatty()) as bar:
            task = bar.add_task("sweep", total=None)

            def progress(name: str, done: int, total: int) -> None:
                bar.update(task, description=name, completed=done, total=total)

            outcomes = build(sweep, out, collect_only=collect_only, progress=progress)
        _finish(outcomes)

    _guard(body)


@dataset_app.command("summary")
def dataset_summary(
    root: Annotated[Path, typer.Argument(help="dataset folder")],
    fmt: Annotated[InfoFormat, typer.Option("--format", "-f", help="table or json")] = InfoFormat.table,
) -> None:
    """Cases per model and configuration, time lost and the slowdown ratio distribution."""

    def body() -> None:
        from traceql.dataset import summary

        df = summary(root)
        if fmt is InfoFormat.json:
            _emit_json(df.to_dicts())
        else:
            render.print_frame(console, df)

    _guard(body)


if __name__ == "__main__":  # python -m traceql.cli
    app()
