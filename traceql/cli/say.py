"""What a command says about the data beside its output: the notes and warnings, on stdout before it."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from traceql.cli.common import console, fold_name, printable

if TYPE_CHECKING:
    from traceql.commands.cache import Served


def note(text: str, *, out: bool = True) -> None:
    """A line for the user (a note about the data, what was written): on stdout, with the output it speaks of,
    so that stderr stays empty on success; ``out=False`` puts it on stderr, where stdout holds csv a note would
    break. On a terminal (or where ``COLUMNS`` is set) folded to its width at the text's separators
    (``traceql.cli.fit``); piped, one line (one to grep)."""
    stream = sys.stdout if out else sys.stderr
    text = printable(text.rstrip("\n"))
    if stream.isatty() or os.environ.get("COLUMNS", "").strip():
        text = fold_name(text, max(console.width, 40))
    stream.write(text + "\n")


def notes(texts: Sequence[str], fmt: Any = None) -> None:
    """The notes about the data, before a command's output: with ``--format json`` none (the JSON holds them
    under ``"notes"``), else one ``note`` each on stdout, marked as one."""
    if getattr(fmt, "value", None) == "json":
        return
    for text in texts:
        note(text if text.startswith(("note:", "warning:")) else f"note: {text}")



def kept(made: Served, fmt: Any = None) -> None:
    """A note where the command's answer came from the cache (``traceql cache``), with when it was computed, or
    the labels its replay started from, or that replay (``made``: ``commands.cache.answered``'s): not with
    ``--format json``, whose output is the same either way."""
    if getattr(fmt, "value", None) == "json":
        return
    for when in _days(made.results):
        note(f"note: answered from the cache, as computed on {when} of the same files and options "
             "(TRACEQL_NO_RESULT_CACHE=1 computes it again)")
    for when in _days(made.labels):
        note(f"note: the labels from the cache, as made on {when} of the same files and options; the rest "
             "computed now (TRACEQL_NO_RESULT_CACHE=1 labels again)")
    for when in _days(made.replays):
        note(f"note: the replay of those labels from the cache, as another command made it on {when} "
             "(TRACEQL_NO_RESULT_CACHE=1 replays again)")


def _days(made: Sequence[float]) -> list[str]:
    return list(dict.fromkeys(time.strftime("%Y-%m-%d %H:%M", time.localtime(t)) for t in made))
