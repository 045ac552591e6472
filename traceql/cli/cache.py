"""`traceql cache info | clear`: the columnar copies of the exports already read."""

from __future__ import annotations

import time

import typer
from rich.markup import escape

from traceql.analyzers.units import size
from traceql.cli.common import CONTEXT, Format, FormatOption, console, counted, emit_json, guarded, table

app = typer.Typer(help="The columnar copies of the exports already read (every later command reads those) and "
                  "the results commands kept.",
                  no_args_is_help=True, context_settings=CONTEXT)


@app.command(epilog="Example:\n\n  traceql cache info --format json")
@guarded
def info(fmt: FormatOption = Format.table) -> None:
    """Where the copies and results are, their size against the bound, and what each was made from."""
    from traceql.commands.cache import info as run_info

    found = run_info()
    if fmt is Format.json:
        emit_json(found.to_dict())
        return
    state = "on" if found.enabled else "off (TRACEQL_NO_CACHE)"
    if found.enabled and not found.results_enabled:
        state += ", results off (TRACEQL_NO_RESULT_CACHE)"
    console.print(f"Cache: {escape(str(found.folder))}")
    console.print(f"{counted(len(found.copies), 'copy', 'copies')}, {counted(len(found.results), 'result')}, "
                  f"{size(found.total)} of {size(found.limit)} (TRACEQL_CACHE_LIMIT); {state}")
    if not found.copies and not found.results:
        return
    out = table(None, ("export, or a command's result", "size", "last used"),
                left={"export, or a command's result"}, wrap={"export, or a command's result"})
    for _where, nbytes, used, source in sorted([*found.copies, *found.results], key=lambda e: -e[2]):
        out.add_row(escape(source), size(nbytes), time.strftime("%Y-%m-%d %H:%M", time.localtime(used)))
    console.print(out)


@app.command(epilog="Example:\n\n  traceql cache clear")
@guarded
def clear() -> None:
    """Remove every copy and result (the exports are never touched; the next command on each makes its copy
    again)."""
    from traceql.commands.cache import clear as run_clear

    copies, results, nbytes = run_clear()
    console.print(f"removed {counted(copies, 'copy', 'copies')} and {counted(results, 'result')} ({size(nbytes)})")
