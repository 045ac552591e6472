"""Input formats → the normalized model. One module per format; each offers ``load(model, files)``, which
puts its checked input files (``inputs.InputFile``, grouped into runs by their ``run``) into the model
(``engine.Model``: small relations as tables, activities as frames), and may return notes for the user.
:func:`load` sends every file to its format's module."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from traceql.model.engine import Model
    from traceql.sources.inputs import InputFile

# format (as ``inputs.check_file`` recognises it) → the module that reads it, in loading order
READERS = {"nsys-sqlite": "traceql.sources.nsys", "kineto-json": "traceql.sources.kineto",
           "ncu-csv": "traceql.sources.ncu"}


def load(model: Model, files: list[InputFile]) -> list[str]:
    """Put every checked input file into ``model``, each through its format's reader; the readers' notes
    (what they had to do differently) are returned."""
    notes: list[str] = []
    for fmt, module in READERS.items():
        mine = [f for f in files if f.fmt == fmt]
        if mine:
            notes += importlib.import_module(module).load(model, mine) or []
    return notes


def by_run(files: list[InputFile]) -> dict[str | None, list[InputFile]]:
    """Files grouped by the run folder they came from (None: given loose), in the order given."""
    groups: dict[str | None, list[InputFile]] = {}
    for f in files:
        groups.setdefault(f.run, []).append(f)
    return groups
