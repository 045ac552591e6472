"""What a dataset build or add reports per input, and the helpers they share outside the store: entry ids
from the inputs' bytes, and removing a collection that did not finish."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from traceql.analyzers.units import MIB


@dataclass
class Outcome:
    """What happened to one input: added, skipped (already in the dataset), collected or failed."""

    name: str
    status: str
    rows: int = 0
    cases: int = 0
    time_lost_ns: int = 0
    message: str = ""
    undecided: int = 0  # rows kept with is_slowdown null (``analyzers.detection.labels.undecided``)


def content_id(paths: list[Path], extra: str = "") -> str:
    """A short hash of files' bytes (and ``extra``): the same inputs give the same entry id."""
    h = hashlib.sha256(extra.encode())
    for p in sorted(paths):
        with p.open("rb") as fh:
            for block in iter(lambda: fh.read(MIB), b""):
                h.update(block)
    return h.hexdigest()[:12]



def remove_tree(path: Path) -> None:
    """Delete a folder this dataset made (a collection that did not finish)."""
    for p in sorted(path.rglob("*"), reverse=True):
        p.unlink() if p.is_file() or p.is_symlink() else p.rmdir()
    if path.exists():
        os.rmdir(path)
