"""The ranking of causes every verdict leads with (``traceql.analyzers.causes``), as the command line prints it."""

from __future__ import annotations

from typing import Any

from rich.markup import escape

from traceql.cli.common import console, indented

LEGEND = ("each: what a normal step would be shorter without it, replayed (traceql whatif): a cost on the "
          "critical path, not the time it took (communication exposed while another rank or the CPU holds the "
          "step costs nothing); priced one at a time, so they overlap")


def print_causes(causes: Any, run_id: str, held: Any = None) -> None:
    """One run's causes, largest first, numbered; ``held``: the slowdown cases its stragglers caused."""
    from traceql.analyzers.causes import held_phrase, sentence  # polars: not for `collect` on a GPU host

    rows = causes.filter(causes["run_id"] == run_id).to_dicts() if not causes.is_empty() else []
    if not rows:
        return
    console.print(f"[bold]Causes[/bold] of {escape(run_id)}, largest first:")
    for i, row in enumerate(rows, 1):
        indented(f"{i}. {sentence(row)}")
    mine = held.filter(held["run_id"] == run_id) if held is not None and not held.is_empty() else None
    if mine is not None and held_phrase(mine):
        console.print(held_phrase(mine, "of the slowdowns' time lost, "))
    console.print(LEGEND)
