"""`traceql cache info | clear`: the columnar copies of the exports already read."""

from __future__ import annotations

import time

import typer
from rich.markup import escape

from traceql.analyzers.units import size
from traceql.cli.common import CONTEXT, Format, FormatOption, console, counted, emit_json, guarded, table

app = typer.Typer(help="The columnar copies of the exports already read (every later command reads those).",
                  no_args_is_help=True, context_settings=CONTEXT)


@app.command(epilog="Example:\n\n  traceql cache info --format json")
@guarded
def info(fmt: FormatOption = Format.table) -> None:
    """Where the copies are, their size against the bound, and the export each was made from."""
    from traceql.commands.cache import info as run_info

    found = run_info()
    if fmt is Format.json:
        emit_json(found.to_dict())
        return
    state = "on" if found.enabled else "off (TRACEQL_NO_CACHE)"
    console.print(f"Cache: {escape(str(found.folder))}")
    console.print(f"{counted(len(found.copies), 'copy', 'copies')}, {size(found.total)} of "
                  f"{size(found.limit)} (TRACEQL_CACHE_LIMIT); {state}")
    if not found.copies:
        return
    out = table(None, ("export", "size", "last used"), left={"export"}, wrap={"export"})
    for _where, nbytes, used, source in reversed(found.copies):
        out.add_row(escape(source), size(nbytes), time.strftime("%Y-%m-%d %H:%M", time.localtime(used)))
    console.print(out)


@app.command(epilog="Example:\n\n  traceql cache clear")
@guarded
def clear() -> None:
    """Remove every copy (the exports are never touched; the next command on each makes its copy again)."""
    from traceql.commands.cache import clear as run_clear

    n, nbytes = run_clear()
    console.print(f"removed {counted(n, 'copy', 'copies')} ({size(nbytes)})")
