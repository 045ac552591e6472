"""`traceql query`: SQL over the normalized relations, shown as a table or written as csv/json/parquet."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from traceql.cli.common import counted, guarded, printable, printable_json, spinner
from traceql.cli.frames import print_frame
from traceql.cli.say import note
from traceql.errors import TraceqlError


class FrameFormat(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"
    parquet = "parquet"


@guarded
def query(
    args: Annotated[list[str], typer.Argument(metavar="[FILE]... SQL", help="trace files, then the SQL")],
    fmt: Annotated[FrameFormat, typer.Option("--format", "-f", help="table, csv, json or parquet")] = FrameFormat.table,
    out: Annotated[Path | None, typer.Option("--output", "-o", help="write the result to this file")] = None,
    limit: Annotated[int, typer.Option(help="rows shown in table format", min=1)] = 50,
) -> None:
    """Run SQL over the normalized model's relations: runs, ranks, kernels, memcpy, nvtx, steps, waits, gpus,
    kernel_metrics, kernel_metric_units, and collectives (one row per collective and rank, its size and
    bandwidth: see traceql collectives)."""
    from traceql.commands.query import run_query, split_args
    from traceql.export.files import format_for, frame_bytes

    if out is None and fmt is FrameFormat.parquet:
        raise TraceqlError("parquet is binary: give --output PATH")
    paths, sql = split_args(args)
    notes: list[str] = []
    with spinner("querying…"):
        shown = out is None and fmt is FrameFormat.table  # a table: one row more than it shows, to say more follow
        kind = fmt.value if fmt is not FrameFormat.table else format_for(out, "--output") if out else "parquet"
        df = run_query(paths, sql, notes=notes, output=out, fmt=kind,
                       limit=limit + 1 if shown else None)
    for text in notes:  # beside a table or a file's line; on stderr where stdout is csv or json
        note(text, out=out is not None or fmt is FrameFormat.table)
    if out is not None:
        note(f"wrote {counted(df.height, 'row')} to {out}")
    elif fmt is FrameFormat.table:
        print_frame(df, limit=limit, more=df.height > limit)
    else:
        text = frame_bytes(df, fmt.value).decode()  # on the terminal: no control character acts on it
        sys.stdout.write(printable_json(text) if fmt is FrameFormat.json else printable(text))
