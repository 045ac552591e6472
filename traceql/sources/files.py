"""A checked input file, and the runs that files given together form: what every reader takes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class InputFile:
    """One checked input: its path and its format (its reader's ``FORMAT``: ``nsys-sqlite``, ``kineto-json``,
    ``ncu-csv``)."""

    path: Path
    fmt: str
    cpu_run: bool = False  # from a collection on CPU: a Kineto trace without GPU activity is expected
    run: str | None = None  # the run folder it came from: its files form one run of that name
    wal: bool = False  # a SQLite database in WAL mode: reading it in place would create files beside it


def by_run(files: list[InputFile]) -> dict[str | None, list[InputFile]]:
    """Files grouped by the run folder they came from (None: given loose), in the order given."""
    groups: dict[str | None, list[InputFile]] = {}
    for f in files:
        groups.setdefault(f.run, []).append(f)
    return groups
