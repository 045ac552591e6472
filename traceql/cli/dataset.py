"""`traceql dataset add | build | summary`: label runs and traces into one parquet dataset."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from traceql.cli.common import (
    CONTEXT,
    Format,
    FormatOption,
    SchedulerOption,
    WorkersOption,
    console,
    emit_json,
    guarded,
    num_ms,
    progress_bar,
    table,
    told,
)

app = typer.Typer(help="Slowdown datasets: label runs and traces into one parquet dataset.", no_args_is_help=True,
                  context_settings=CONTEXT)


def _finish(outcomes: list[Any]) -> None:
    """The closing table of `dataset add` / `dataset build` on stdout, one ``error:`` line on stderr for each
    entry that failed (naming it), and exit 1 when one did."""
    done = table("Dataset", ("entry", "status", "rows", "cases", "lost ms", "note"), left={"status"},
                 wrap={"entry", "note"})
    failed = [o for o in outcomes if o.status == "failed"]
    for o in outcomes:
        done.add_row(escape(o.name), o.status, f"{o.rows:,}", f"{o.cases:,}", num_ms(o.time_lost_ns),
                     "the error is on stderr" if o in failed else escape(o.message))
    console.print(done)
    counts = {s: sum(o.status == s for o in outcomes) for s in ("added", "skipped", "collected", "failed")}
    console.print(", ".join(f"{n} {s}" for s, n in counts.items() if n) or "nothing to do")
    undecided = sum(o.undecided for o in outcomes if o.status == "added")
    if undecided:
        console.print(f"kept {undecided:,} undecided rows (is_slowdown null: they overlapped communication with no "
                      "reference, or a contaminated one, to judge them)")
    for o in failed:  # whole, on one line each: an error message is not to be folded into a cell
        told(o.message if o.message.startswith(o.name) else f"{o.name}: {o.message}")
    if failed:
        raise typer.Exit(1)


def print_summary(df: Any) -> None:
    """The human form of ``dataset summary``."""
    out = table("Slowdown cases per model and configuration", ("model / config", "entries", "rows", "cases",
                                                                "undec.", "case %", "lost ms", "ratio"),
                wrap={"model / config"})
    for r in df.iter_rows(named=True):
        ratios = [f"{r[c]:.2f}" if r[c] is not None else "-" for c in ("ratio_median", "ratio_p90", "ratio_max")]
        pct = "-" if r["case_pct"] is None else f"{r['case_pct']:.2f}"
        out.add_row(escape(f"{r['model']} {r['config']}"), f"{r['entries']:,}", f"{r['rows']:,}", f"{r['cases']:,}",
                    f"{r['undecided']:,}", pct, f"{r['time_lost_ms']:,.3f}", "/".join(ratios) + "x")
    console.print(out)
    console.print("undec.: undecided rows (is_slowdown null); case %: the cases' share of the decided rows; ratio: "
                  "the slowdown ratio of the cases, median/p90/max")


@app.command("add", epilog="Example:\n\n  traceql dataset add slowdowns/ runs/my-run --baseline runs/my-single")
@guarded
def add(
    root: Annotated[Path, typer.Argument(help="dataset folder (created if missing)")],
    sources: Annotated[list[Path], typer.Argument(help="run folders or traces; each is one entry")],
    baseline: Annotated[list[Path] | None, typer.Option("--baseline", "-b", help="isolated run(s) to pair with; "
                                                         "each source gets the one it matches best")] = None,
    model: Annotated[str | None, typer.Option(help="model name (default: the run's input folder, or the trace)")]
    = None,
    config: Annotated[str | None, typer.Option(help="configuration name (default: from the run's config)")] = None,
    workers: WorkersOption = 1,
    scheduler: SchedulerOption = None,
) -> None:
    """Label run folders or traces and add one entry each; entries already there are skipped."""
    from traceql.commands import dataset

    with progress_bar("adding…") as update:
        outcomes = dataset.add(root, sources, baselines=baseline or [], model=model, config=config, workers=workers,
                               scheduler=scheduler, progress=update)
    _finish(outcomes)


@app.command("build", epilog="Example:\n\n  traceql dataset build sweep.json --out slowdowns/")
@guarded
def build(
    sweep: Annotated[Path, typer.Argument(help="SWEEP.json: inputs × a grid of local_config values")],
    out: Annotated[Path, typer.Option("--out", "-o", help="dataset folder")],
    collect_only: Annotated[bool, typer.Option(help="collect the runs, label nothing (run build again to label)")]
    = False,
    workers: WorkersOption = 1,
    scheduler: SchedulerOption = None,
) -> None:
    """Collect every configuration of a sweep (and its isolated run), label it, add it; resumable."""
    from traceql.commands import dataset

    with progress_bar("sweep:") as update:
        outcomes = dataset.build(sweep, out, collect_only=collect_only, workers=workers, scheduler=scheduler,
                                 progress=update)
    _finish(outcomes)


@app.command("summary", epilog="Example:\n\n  traceql dataset summary slowdowns/ --format json")
@guarded
def summary(
    root: Annotated[Path, typer.Argument(help="dataset folder")],
    fmt: FormatOption = Format.table,
) -> None:
    """Cases per model and configuration, time lost and the slowdown ratio distribution."""
    from traceql.commands import dataset

    df = dataset.summary(root)
    if fmt is Format.json:
        emit_json(df.to_dicts())
    else:
        print_summary(df)
