"""`traceql export perfetto`: the timeline, with the slowdown cases marked, for Perfetto / chrome://tracing."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from traceql.cli.common import CONTEXT, BaselineOption, Files, ThresholdOption, guarded, spinner
from traceql.cli.say import note
from traceql.labelling.options import PAIRED_FACTOR

app = typer.Typer(help="Export a trace for other tools.", no_args_is_help=True, context_settings=CONTEXT)


@app.command(epilog="Example:\n\n  traceql export perfetto run.sqlite -o trace.json.gz")
@guarded
def perfetto(
    output: Annotated[
        Path, typer.Option("--output", "-o", help="the Chrome trace JSON to write (.json, or .json.gz to gzip it)")
    ],
    files: Files = None,
    baseline: BaselineOption = None,
    threshold: ThresholdOption = PAIRED_FACTOR,
    single_trace: Annotated[
        bool, typer.Option("--single-trace", help="label by the detector, hiding the trace's isolated steps")
    ] = False,
) -> None:
    """Write the kernels, memory operations and steps as Chrome trace JSON (Perfetto, chrome://tracing), the
    slowdown cases of `detect` marked in red."""
    from traceql.commands.export import perfetto as run_perfetto

    with spinner("exporting…"):
        result = run_perfetto(files or None, output=output, baseline=baseline or None, threshold=threshold,
                              single_trace=single_trace)
    for text in result.notes:
        note(text)
    note(f"wrote {result.total:,} events ({result.cases:,} slowdown cases) to {result.path}")
