"""A dataset's dataset.json: read and checked (its format, its entries, each entry's file under data/)."""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

from traceql.errors import InputError
from traceql.jsonfile import load_json

FORMAT = "traceql-dataset/1"
KINDS = {list: "list", str: "string", bool: "boolean", int: "number", float: "number", type(None): "null"}


def parse(path: Path) -> dict[str, Any]:
    """dataset.json at ``path``; one InputError naming it when it is not a traceql dataset's."""
    where = str(path)
    meta = load_json(path)
    if not isinstance(meta, dict):
        kind = KINDS.get(type(meta), type(meta).__name__)
        raise InputError(f"not a traceql dataset (it holds a JSON {kind}, not an object)", path=where)
    if meta.get("format") != FORMAT:
        raise InputError(f"not a traceql dataset (format {meta.get('format')!r})", path=where)
    entries = meta.get("entries")
    if not isinstance(entries, dict):
        raise InputError('not a traceql dataset (no "entries" object)', path=where)
    for key, entry in entries.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("file"), str):
            raise InputError(f'entry {key!r} has no "file"', path=where)
        file = PurePosixPath(entry["file"])
        if file.is_absolute() or ".." in file.parts or file.parts[:1] != ("data",):
            raise InputError(f"entry {key!r}: its file {entry['file']!r} is not under data/ (dataset.json edited "
                             "by hand?)", path=where)
    return meta
