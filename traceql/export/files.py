"""Frames written as files (csv, json, parquet), and the atomic write every output of traceql goes through
(``traceql.collectors.files``: the one implementation, which the collectors use too)."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING

from traceql.collectors.files import atomic_path
from traceql.errors import OptionError, TraceqlError

if TYPE_CHECKING:
    import polars as pl


def atomic_write(path: Path, write: Callable[[IO[bytes]], None]) -> None:
    """Write ``path`` through ``write(fh)`` atomically (``traceql.collectors.files.atomic_path``: a temp file
    beside it, flushed to disk, renamed into place); the user's errors as one line naming the file."""
    path = Path(path)
    if path.is_dir():
        raise TraceqlError("is a directory; give a file name for the output", path=str(path))
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise TraceqlError("output directory does not exist", path=str(parent))
    try:
        with atomic_path(path) as tmp:
            try:
                fh = tmp.open("xb")
            except OSError as exc:
                raise TraceqlError(f"cannot write here: {exc.strerror} (a read-only folder?)", path=str(path)) from None
            with fh:
                write(fh)
    except OSError as exc:
        raise TraceqlError(f"cannot write: {exc.strerror} (disk full or no permission?)", path=str(path)) from None


def frame_bytes(df: pl.DataFrame, fmt: str) -> bytes:
    """A frame serialized as csv, json (a list of records) or parquet."""
    buf = io.BytesIO()
    if fmt == "csv":
        df.write_csv(buf)
    elif fmt == "json":
        df.write_json(buf)
        buf.write(b"\n")
    elif fmt == "parquet":
        df.write_parquet(buf)
    else:
        raise TraceqlError(f"unknown format {fmt!r}; choose one of csv, json, parquet")
    return buf.getvalue()


FRAME_SUFFIXES = {".parquet": "parquet", ".csv": "csv", ".json": "json"}


def format_for(path: Path, option: str = "--out") -> str:
    """The frame format a file name asks for by its suffix; OptionError for any other suffix."""
    fmt = FRAME_SUFFIXES.get(Path(path).suffix.lower())
    if fmt is None:
        raise OptionError(f"{option} {path}: give a .parquet, .csv or .json file (the suffix picks the format)")
    return fmt


def write_frame(df: pl.DataFrame, path: Path, fmt: str) -> None:
    """Write a frame to ``path`` atomically in ``fmt``."""
    data = frame_bytes(df, fmt)
    atomic_write(path, lambda fh: fh.write(data))
