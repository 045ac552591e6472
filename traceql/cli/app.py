"""The `traceql` application: every command's module registered under its name, the global options, and an
example or two under each command's --help."""

from __future__ import annotations

from typing import Annotated

import typer

from traceql.cli import cache, collect, collectives, common, dataset, detect, export, info, query, ranks, report, whatif
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
        from traceql.version import __version__

        typer.echo(f"traceql {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="print the version and exit")] = False,
    wide: Annotated[bool, typer.Option("--wide", help="tables as wide as they need (no folding)")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress display")] = False,
    steps_from: Annotated[str | None, typer.Option(
        "--steps-from", metavar="REGEX", help="steps are the ranges (NVTX, Kineto annotations) this pattern "
                                              "matches; its group, if any, the step's number")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="read each export itself, not its columnar copy "
                                                               "(traceql cache info)")] = False,
) -> None:
    """Trace analysis and slowdown detection for distributed PyTorch training."""
    common.configure(wide=wide, quiet=quiet, steps_from=steps_from, no_cache=no_cache)
# an example or two per command, under its --help (on shipped data, as the docs' examples)
EXAMPLES = {
    "info": ["traceql info", "traceql info run.sqlite --format json --top 20"],
    "query": ['traceql query "SELECT rank, kind, count(*) FROM kernels GROUP BY ALL ORDER BY ALL"',
              'traceql query run.sqlite "SELECT * FROM kernels" --output kernels.parquet'],
    "detect": ["traceql detect", "traceql detect run.sqlite --baseline single.sqlite --out cases.parquet"],
    "ranks": ["traceql ranks runs/my-run --steps 20"],
    "whatif": ["traceql whatif runs/my-run --format json"],
    "collect": ["traceql collect my_model/ --profiler nsys --out runs/my-run"],
    "report": ["traceql report run.sqlite -o report.html --step 3"],
    "diff": ["traceql diff before.sqlite after.sqlite --fail-above 3"],
    "collectives": ["traceql collectives runs/my-run --steps", "traceql collectives run.json.gz --format json"],
    "solve": ["traceql solve profiles/ --global-batch 64 --cluster cluster.json"],
}


def _epilog(name: str) -> str | None:
    lines = EXAMPLES.get(name)
    return None if lines is None else "Examples:\n\n" + "\n\n".join(f"  {line}" for line in lines)


for _name, _function in (("info", info.info), ("query", query.query), ("detect", detect.detect),
                         ("ranks", ranks.ranks), ("collectives", collectives.collectives),
                         ("whatif", whatif.whatif), ("collect", collect.collect),
                         ("report", report.report), ("diff", diff_cli.diff), ("solve", solve_cli.solve)):
    # the docstring as one paragraph: typer keeps its line breaks, which break the help's own folding
    app.command(_name, epilog=_epilog(_name), help=" ".join((_function.__doc__ or "").split()))(_function)
app.add_typer(dataset.app, name="dataset")
app.add_typer(export.app, name="export")
app.add_typer(profile_cli.app, name="profile")
app.add_typer(cache.app, name="cache")
