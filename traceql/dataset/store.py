"""A slowdown dataset on disk: parquet files partitioned by model and configuration, and dataset.json.

    DIR/dataset.json                                   every entry: inputs, config, versions, counts
    DIR/data/model=<m>/config=<c>/<entry>.parquet      one file per entry, the per-kernel rows

Every file is written to a hidden temp name and renamed into place, so a reader globbing
``data/**/*.parquet`` (polars, DuckDB) never sees a partial file, and a killed writer leaves nothing
half-written. An entry's parquet is renamed in before dataset.json records it; an entry id is a function
of its inputs, so redoing an unrecorded entry overwrites the same file: never a duplicate.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from traceql.errors import InputError
from traceql.export.files import atomic_write

if TYPE_CHECKING:  # polars loads for labelling, not for collecting
    import polars as pl

FORMAT = "traceql-dataset/1"


@dataclass
class Outcome:
    """What happened to one input: added, skipped (already in the dataset), collected or failed."""

    name: str
    status: str
    rows: int = 0
    cases: int = 0
    time_lost_ns: int = 0
    message: str = ""


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+-]+", "_", str(text)) or "_"


def content_id(paths: list[Path], extra: str = "") -> str:
    """A short hash of files' bytes (and ``extra``): the same inputs give the same entry id."""
    h = hashlib.sha256(extra.encode())
    for p in sorted(paths):
        with p.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()[:12]


class Dataset:
    """A dataset folder; created on first write."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.meta_path = self.root / "dataset.json"

    def load(self) -> dict[str, Any]:
        if not self.meta_path.exists():
            return {"format": FORMAT, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "entries": {}}
        try:
            meta = json.loads(self.meta_path.read_text())
        except json.JSONDecodeError as exc:
            raise InputError(f"dataset.json is not valid JSON ({exc.msg})", path=str(self.meta_path)) from None
        if meta.get("format") != FORMAT:
            raise InputError(f"not a traceql dataset (format {meta.get('format')!r})", path=str(self.meta_path))
        return meta

    def has(self, entry_id: str) -> bool:
        return entry_id in self.load()["entries"]

    def partition(self, model: str, config: str) -> Path:
        return self.root / "data" / f"model={_safe(model)}" / f"config={_safe(config)}"

    def add(self, entry_id: str, model: str, config: str, rows: pl.DataFrame, info: dict[str, Any]) -> Path:
        """Write one entry's rows, then record it."""
        part = self.partition(model, config)
        part.mkdir(parents=True, exist_ok=True)
        path = part / f"{_safe(entry_id)}.parquet"
        atomic_write(path, lambda fh: rows.write_parquet(fh))
        meta = self.load()
        meta["entries"][entry_id] = {**info, "model": model, "config": config,
                                     "file": str(path.relative_to(self.root)), "rows": rows.height,
                                     "added": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        self.root.mkdir(parents=True, exist_ok=True)
        data = json.dumps(meta, indent=1, default=str).encode()
        atomic_write(self.meta_path, lambda fh: fh.write(data))
        return path

    def scan(self) -> pl.LazyFrame:
        """Every recorded entry's rows, lazily."""
        import polars as pl

        meta = self.load()
        files = [self.root / e["file"] for e in meta["entries"].values() if (self.root / e["file"]).exists()]
        if not files:
            raise InputError("the dataset has no entries yet", path=str(self.root))
        return pl.concat([pl.scan_parquet(f) for f in files], how="diagonal_relaxed")


def remove_tree(path: Path) -> None:
    """Delete a folder this dataset made (a collection that did not finish)."""
    for p in sorted(path.rglob("*"), reverse=True):
        p.unlink() if p.is_file() or p.is_symlink() else p.rmdir()
    if path.exists():
        os.rmdir(path)
