"""`traceql ranks`: the stragglers, then every step of every rank, then each rank over the whole capture."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from traceql.analyzers.shown import RANKS_SHOWN
from traceql.cli.causes import print_causes
from traceql.cli.common import (
    BaselineOption,
    Files,
    Format,
    FormatOption,
    HtaCompatOption,
    ThresholdOption,
    console,
    emit_json,
    guarded,
    progress_bar,
    table,
)
from traceql.cli.render import print_ranks
from traceql.cli.say import kept, notes
from traceql.labelling.options import PAIRED_FACTOR
from traceql.model.step_marker import described


@guarded
def ranks(
    files: Files = None,
    baseline: BaselineOption = None,
    fmt: FormatOption = Format.table,
    threshold: ThresholdOption = PAIRED_FACTOR,
    steps: Annotated[int, typer.Option("--steps", help="at most this many steps (the longest) and stragglers",
                                       min=1)] = 12,
    every_rank: Annotated[bool, typer.Option("--every-rank", help="every rank of each step in the steps table "
                                             f"(a run of more than {RANKS_SHOWN} ranks: each step's slowest)")]
    = False,
    hta_compat: HtaCompatOption = False,
) -> None:
    """Per step and rank: where the time went, slowdowns, and the stragglers the other ranks waited for."""
    from traceql.commands.cache import answered
    from traceql.commands.ranks import ranks as run_ranks

    with answered() as made, progress_bar("reading the ranks…"):
        result = run_ranks(files or None, baseline=baseline or None, threshold=threshold, hta_compat=hta_compat)
    kept(made, fmt)
    notes(result.notes, fmt)
    if fmt is Format.json:
        emit_json(result.to_dict())
        return
    for (run_id,), rows in result.ranks.group_by("run_id", maintain_order=True):
        run_steps = result.steps.filter(result.steps["run_id"] == run_id)
        print_causes(result.causes, run_id, result.held)
        if run_id in result.unaligned:
            console.print(f"[bold]Stragglers[/bold] of {run_id}: not measured, its ranks' clocks disagree")
        elif rows.height < 2:
            console.print(f"[bold]Stragglers[/bold] of {run_id}: cannot judge, one rank (nobody to wait for it)")
        elif run_steps.is_empty():
            console.print(f"[bold]Stragglers[/bold] of {run_id}: cannot judge, no step ranges ({described()}) to "
                          "compare the ranks in")
        else:
            _print_stragglers(run_id, result.stragglers.filter(result.stragglers["run_id"] == run_id), steps)
        _print_steps(run_id, result.steps.filter(result.steps["run_id"] == run_id), steps, every_rank)
        print_ranks(run_id, rows)


def _ms(ns: Any) -> str:
    return "-" if ns is None else f"{ns / 1e6:,.2f}"


def _print_stragglers(run_id: str, rows: Any, limit: int) -> None:
    """One run's stragglers in step order; of many, the ``limit`` that cost their steps most."""
    if rows.is_empty():
        console.print(f"[bold]No straggler[/bold] in {run_id}: "
                      "no rank held the others 10 % of a step and cost it 5 % (by the replay)")
        return
    title = f"Stragglers of {run_id}"
    if rows.height > limit:
        title = f"The {limit} costliest of {rows.height} stragglers of {run_id} (--steps N for more)"
        rows = rows.sort(["cost_ns", "held_ns", "step"], descending=[True, True, False], nulls_last=True
                         ).head(limit).sort("step")
    out = table(title, ("step", "rank", "cost ms", "step ms", "without", "held ms", "waiters", "last at"),
                left={"waiters", "last at"})
    for r in rows.iter_rows(named=True):
        out.add_row(str(r["step"]), str(r["rank"]), _ms(r["cost_ns"]), _ms(r["step_ns"]), _ms(r["without_ns"]),
                    _ms(r["held_ns"]), ",".join(map(str, r["waiting_ranks"])) or "-",
                    f"{r['last_at']} of {r['collectives']}")
    console.print(out)
    console.print("cost: the step's time (replayed) less its time without the straggler (see traceql whatif); "
                  "held: how long the others waited for it at the step's collectives, summed (evidence, "
                  "not cost); waiters: the ranks that waited for it (rank numbers); last at: of the step's "
                  "collectives")


def _print_steps(run_id: str, rows: Any, limit: int, every_rank: bool) -> None:
    """The steps of one run, rank by rank (``analyzers.reports.longest_steps``): of a long capture, the ``limit``
    steps with the longest GPU time; of many ranks, each step's slowest unless ``every_rank``."""
    from traceql.analyzers.reports import longest_steps  # polars: not for `collect` on a GPU host

    if rows.is_empty():
        console.print(f"{run_id}: no step ranges ({described()}) to break down")
        return
    n, first, ranks = rows["step"].n_unique(), rows["step"].min(), rows["rank"].n_unique()  # the first captured
    rows, slowest = longest_steps(rows, limit, every_rank)
    title = f"Steps of {run_id} (ms)" if n <= limit else \
        f"The {limit} longest of {n} steps of {run_id} (ms; --steps N for more)"
    if slowest:
        title += f"; of its {ranks} ranks, the one of longest GPU time (--every-rank: all)"
    out = table(title, ("step", "rank", "cpu", "gpu", "compute", "comm", "memory", "idle", "exposed", "cases",
                        "lost"), keys=2)
    for r in rows.iter_rows(named=True):
        out.add_row(f"{r['step']}{'*' if r['step'] == first else ''}", str(r["rank"]), *(_ms(r[c]) for c in (
            "cpu_ns", "gpu_ns", "compute_ns", "comm_ns", "memory_ns", "idle_ns", "exposed_comm_ns")),
            f"{r['cases']:,}", _ms(r["time_lost_ns"]))
    console.print(out)
    starred = ("; *: the first captured step (each rank's capture began at its own moment): not judged"
               if (rows["step"] == first).any() else "")
    console.print(f"exposed: comm with no compute alongside, its time (what it costs a step: the causes); lost: "
                  f"GPU time the slowdowns added{starred}")
