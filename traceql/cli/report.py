"""`traceql report`: one self-contained HTML page of what detect found (or of a dataset)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from traceql.cli.common import BaselineOption, Files, ThresholdOption, counted, guarded, spinner
from traceql.cli.say import note
from traceql.labelling.options import PAIRED_FACTOR


@guarded
def report(
    files: Files = None,
    output: Annotated[Path, typer.Option("--output", "-o", help="the page to write (.html)")] = Path("report.html"),
    baseline: BaselineOption = None,
    step: Annotated[int | None, typer.Option(help="the step to draw (default: the one with the most time lost)")]
    = None,
    threshold: ThresholdOption = PAIRED_FACTOR,
    single_trace: Annotated[
        bool, typer.Option("--single-trace", help="label by the detector, hiding the trace's isolated steps")
    ] = False,
) -> None:
    """Write one self-contained HTML page: per-rank summary, a step's timeline with the slowed kernels,
    the top slowed kernels, ratios by collective, time lost per step; or a dataset folder's summary."""
    from traceql.commands.report import report as run_report

    with spinner("writing the report…"):
        done = run_report(files or None, output=output, baseline=baseline or None, step=step, threshold=threshold,
                          single_trace=single_trace)
    for text in done.notes:
        note(text)
    what = f"step {done.step} drawn, " if done.step is not None else ""
    note(f"wrote {done.path} ({what}{counted(done.cases, 'slowdown case')}); open it in a browser, no network "
         "needed")
