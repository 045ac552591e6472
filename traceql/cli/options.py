"""The options several commands share, as typer declares them: formats, trace files, labelling, workers."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer


class Format(str, Enum):
    table = "table"
    json = "json"


Files = Annotated[
    list[Path] | None,
    typer.Argument(help="traces: Nsight Systems SQLite exports, torch.profiler JSON, Nsight Compute CSVs, run "
                        "folders of traceql collect, or folders of them (default: the embedded example)",
                   show_default=False),
]
FormatOption = Annotated[Format, typer.Option("--format", "-f", help="table or json")]
WorkersOption = Annotated[int, typer.Option("--workers", "-w", help="label the traces in N local processes "
                                            "(Dask distributed); 1: one after another here", min=1)]
SchedulerOption = Annotated[str | None, typer.Option("--scheduler", help="label the traces on the Dask "
                                                     "scheduler at ADDRESS (tcp://host:8786)", metavar="ADDRESS")]
# the labelling options of every command that labels (detect, ranks, report, export)
BaselineOption = Annotated[list[Path] | None, typer.Option(
    "--baseline", "-b", help="isolated run(s) of the same model and shapes (paired labels)")]
ThresholdOption = Annotated[float, typer.Option(
    help="a case: overlapped and at least RATIO x its baseline (above 1.0)", metavar="RATIO")]
HtaCompatOption = Annotated[bool, typer.Option(
    "--hta-compat", help="per-rank breakdown as Holistic Trace Analysis 0.5.0 computes it")]
