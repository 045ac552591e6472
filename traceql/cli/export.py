"""`traceql export perfetto`: the timeline, with the slowdown cases marked, for Perfetto / chrome://tracing."""

from __future__ import annotations

import typer

app = typer.Typer(help="Export a trace for other tools.", no_args_is_help=True)
