"""The `traceql` command line: each command parses options, calls one library function, renders it."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from contextlib import nullcontext as _nullcontext
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console

from traceql import output, render
from traceql.detect import detect as run_detect
from traceql.errors import TraceqlError
from traceql.info import trace_info
from traceql.query import run_query
from traceql.trace import read_trace

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


def main() -> None:  # pragma: no cover - console entry
    app()
