"""The `traceql` command line: one module per command, each parsing options, calling its function in
``traceql.commands`` and rendering the result. No analysis happens here."""

from __future__ import annotations

from typing import Annotated

import typer

from traceql.cli import collect, common, dataset, detect, export, info, query, ranks, report, whatif
from traceql.cli import diff as diff_cli
from traceql.cli import profile as profile_cli
from traceql.cli import solve as solve_cli

app = typer.Typer(
    help="Trace analysis and slowdown detection for distributed PyTorch training.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    context_settings=common.CONTEXT,
    cls=common.OneLineErrors,
)


def _version(value: bool) -> None:
    if value:
        from traceql import __version__

        typer.echo(f"traceql {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="print the version and exit")] = False,
    wide: Annotated[bool, typer.Option("--wide", help="tables as wide as they need (no folding)")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress display")] = False,
) -> None:
    """Trace analysis and slowdown detection for distributed PyTorch training."""
    common.configure(wide=wide, quiet=quiet)
app.command()(info.info)
app.command()(query.query)
app.command()(detect.detect)
app.command()(ranks.ranks)
app.command()(whatif.whatif)
app.command()(collect.collect)
app.command()(report.report)
app.command()(diff_cli.diff)
app.command()(solve_cli.solve)
app.add_typer(dataset.app, name="dataset")
app.add_typer(export.app, name="export")
app.add_typer(profile_cli.app, name="profile")

if __name__ == "__main__":  # python -m traceql.cli
    app()
