"""`traceql whatif`: per step, its time as measured, replayed, and without each cause; a verdict per run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from traceql.cli.common import (
    BaselineOption,
    Files,
    Format,
    FormatOption,
    ThresholdOption,
    console,
    emit_json,
    guarded,
    indented,
    progress_bar,
    table,
)
from traceql.cli.say import kept, notes
from traceql.labelling.options import PAIRED_FACTOR


@guarded
def whatif(
    files: Files = None,
    baseline: BaselineOption = None,
    fmt: FormatOption = Format.table,
    threshold: ThresholdOption = PAIRED_FACTOR,
    steps: Annotated[int, typer.Option("--steps", help="at most this many steps a run (the longest)", min=1)] = 12,
    bucket_cap: Annotated[float | None, typer.Option(
        "--bucket-cap", metavar="MB", min=0.001,
        help="each step also with DDP's gradient buckets at this cap (bucket_cap_mb)")] = None,
    gradients: Annotated[Path | None, typer.Option(
        "--gradients", metavar="FILE",
        help="the model's gradient sizes (JSON) for --bucket-cap, where the run folder records none")] = None,
) -> None:
    """What each cause costs in step time: a replay of the run, without contention, without the straggler,
    and with communication serialized.

    The table, a normal step a row, in ms: measured (its first GPU start to its last GPU end on any rank),
    replayed (the replay of the trace's own durations), no straggler (as if its straggler, rN, were as fast as
    the others), no contention (every slowdown case at its baseline), serialized (communication after
    computation, at its speed alone), MB cap (with --bucket-cap: DDP's buckets at that cap). Then the verdict:
    the causes by what they cost a step on the critical path, and what overlap saves."""
    from traceql.commands.cache import answered
    from traceql.commands.whatif import whatif as run_whatif

    with answered() as made, progress_bar("replaying…"):
        result = run_whatif(files or None, baseline=baseline or None, threshold=threshold, bucket_cap=bucket_cap,
                            gradients=gradients)
    kept(made, fmt)
    notes(result.notes, fmt)
    if fmt is Format.json:
        emit_json(result.to_dict())
        return
    for verdict in result.runs:
        if verdict.clocks_agree:
            _print_steps(verdict.run_id, result.steps.filter(result.steps["run_id"] == verdict.run_id), steps,
                         bucket_cap)
        console.print(f"[bold]Verdict[/bold] for {verdict.run_id}:")
        for line in verdict.lines:
            indented(line)
    if result.measured:
        console.print(result.measured)
    if result.steps.is_empty():  # nothing was replayed a step: each run's verdict says so
        return
    g = result.graph
    console.print(f"replayed {g['activities']:,} GPU activities: {g['recorded']:,} waits recorded in the trace, "
                  f"{g['inferred']:,} inferred; {g['unexplained']:,} began later than anything explains (kept "
                  "as measured)")


def _ms(ns: Any) -> str:
    return "-" if ns is None else f"{ns / 1e6:,.2f}"


def _print_steps(run_id: str, rows: Any, limit: int, cap: float | None = None) -> None:
    from traceql.analyzers.reports import longest  # polars: not for `collect` on a GPU host

    if rows.is_empty():  # the run's verdict says it has no steps to replay
        return
    title = f"What if, {run_id} (ms a step)"
    if rows.height > limit:
        rows = longest(rows, "replayed_ns", limit)
        title = f"What if, {run_id}: the {limit} longest of its steps (ms; --steps N for more)"
    heads = ("step", "measured", "replayed", "no straggler", "no contention", "serialized")
    out = table(title, (*heads, f"{cap:g} MB cap") if cap is not None else heads)
    for r in rows.sort("step").iter_rows(named=True):
        straggler = f" (r{r['straggler_rank']})" if r["straggler_rank"] is not None else ""
        cells = [f"{r['step']}{'*' if r['first'] else ''}", _ms(r["measured_ns"]), _ms(r["replayed_ns"]),
                 _ms(r["without_straggler_ns"]) + straggler, _ms(r["without_contention_ns"]), _ms(r["serialized_ns"])]
        out.add_row(*cells, *([_ms(r["bucket_cap_ns"])] if cap is not None else []))
    console.print(out)
    if rows["first"].any():
        console.print("*: the first captured step (each rank's capture began at its own moment): shown, not "
                      "judged")
