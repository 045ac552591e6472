"""The `traceql` command line: one module per command, each parsing options, calling its function in
``traceql.commands`` and rendering the result. No analysis happens here."""

from __future__ import annotations

import typer

from traceql.cli import collect, dataset, detect, export, info, query, report

app = typer.Typer(
    help="Trace analysis and slowdown detection for distributed PyTorch training.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.command()(info.info)
app.command()(query.query)
app.command()(detect.detect)
app.command()(collect.collect)
app.command()(report.report)
app.add_typer(dataset.app, name="dataset")
app.add_typer(export.app, name="export")

if __name__ == "__main__":  # python -m traceql.cli
    app()
