"""Input formats → the normalized model: one reader module per format, asked in the order of :data:`READERS`.

A reader module declares

- ``FORMAT``: its format's name (``nsys-sqlite``), which the files it claims carry (``files.InputFile.fmt``);
- ``sniff(head, path) -> bool``: whether a file is one of its own, from the file's first 100 bytes (``head``)
  and its name; the first reader that claims a file reads it;
- ``load(model, files)``: puts its checked input files (``files.InputFile``, grouped into runs by their
  ``run``) into the model (``engine.Model``: small relations as tables, activities as frames), and may return
  notes for the user;

and, where it has them:

- ``check(file, head, size) -> InputFile``: what it checks of a file it claimed, from the same first bytes
  and the file's size (InputError: an export cut short), and what it notes on it (an export in WAL mode);
- ``refuse(head, path) -> str | None``: why it refuses a file that no reader claims (an nsys report that was
  not exported, with the command that exports it);
- ``loose_runs(loose) -> list[list[Path]]``: which of its files given loose form one run together
  (``runs.split_runs``); any other loose file is a run of its own;
- ``TIMELINE = False``: its files hold no timeline (Nsight Compute's metrics): in runs, they go with the first.

Adding a format is one reader module and one line in :data:`READERS`. A reader is imported when it is first
asked. :func:`load` sends every file to its format's reader.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from traceql.model.engine import Model
    from traceql.sources.files import InputFile

# the readers, in the order they are asked whose a file is and then load their files; a database named .csv
# stays the ncu reader's (nsys.sniff leaves it), a JSON or gzip file named .csv the Kineto reader's
READERS = ["traceql.sources.nsys", "traceql.sources.kineto", "traceql.sources.ncu"]


def _readers() -> Iterator[ModuleType]:
    """The reader modules in the order of READERS, each imported when reached."""
    return (importlib.import_module(name) for name in READERS)


def recognise(head: bytes, path: Path) -> ModuleType | None:
    """The first reader whose ``sniff`` claims the file (``head``: its first 100 bytes); None when none does."""
    return next((r for r in _readers() if r.sniff(head, path)), None)


def refusal(head: bytes, path: Path) -> str | None:
    """Why a reader refuses a file that no reader claims (the first reader's reason); None when none does."""
    reasons = (r.refuse(head, path) for r in _readers() if hasattr(r, "refuse"))
    return next((why for why in reasons if why), None)


def reader(fmt: str) -> ModuleType:
    """The reader of the format ``fmt``."""
    return next(r for r in _readers() if r.FORMAT == fmt)


def load(model: Model, files: list[InputFile]) -> list[str]:
    """Put every checked input file into ``model``, each through its format's reader; the readers' notes
    (what they had to do differently) are returned."""
    notes: list[str] = []
    waiting, readers = {f.fmt for f in files}, _readers()
    while waiting:  # the readers after the last one with files are not imported
        r = next(readers)
        if r.FORMAT in waiting:
            waiting.remove(r.FORMAT)
            notes += r.load(model, [f for f in files if f.fmt == r.FORMAT]) or []
    return notes
