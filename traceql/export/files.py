"""Frames written as files (csv, json, parquet), and the atomic write every output of traceql goes through
(``traceql.collectors.files``: the one implementation, which the collectors use too)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, TYPE_CHECKING

from traceql.collectors.files import atomic_path
from traceql.errors import OptionError, TraceqlError

if TYPE_CHECKING:
    import polars as pl


def atomic_write(path: Path, write: Callable[[IO[bytes]], object]) -> None:
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


def _writable(df: pl.DataFrame, fmt: str) -> pl.DataFrame:
    """``df`` with the columns ``fmt`` cannot hold as they are turned to text: bytes as hex (csv, json), lists
    and structs as their JSON (csv)."""
    import polars as pl  # loads with the analysis, not for `traceql collect`

    out: list[pl.Expr | pl.Series] = []
    for col, dtype in df.schema.items():
        if dtype == pl.Binary and fmt in ("csv", "json"):
            out.append(pl.col(col).bin.encode("hex"))
        elif dtype.is_nested() and fmt == "csv":
            out.append(pl.Series(col, [None if v is None else json.dumps(v, default=str) for v in df[col].to_list()],
                                 pl.String))
        else:
            out.append(pl.col(col))
    return df.select(out)


def _json_value(value: object) -> object:
    """A value JSON has no type for: bytes as hex, anything else as its text."""
    return value.hex() if isinstance(value, (bytes, bytearray)) else str(value)


def frame_bytes(df: pl.DataFrame, fmt: str) -> bytes:
    """A frame serialized as csv, json (a list of records) or parquet (bytes as hex text in csv and json, lists
    and structs as JSON text in csv); OptionError for a column the format cannot hold."""
    import polars as pl  # loads with the analysis, not for `traceql collect`

    df = _writable(df, fmt)
    try:
        return _serialized(df, fmt)
    except (pl.exceptions.PolarsError, ValueError, TypeError, OverflowError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise OptionError(f"--format {fmt}: the result cannot be written as {fmt} ({first}); cast that column, "
                          "e.g. to VARCHAR, or choose another format") from None


def _serialized(df: pl.DataFrame, fmt: str) -> bytes:
    buf = io.BytesIO()
    if fmt == "csv":
        df.write_csv(buf)
    elif fmt == "json" and any("Binary" in str(t) for t in df.dtypes):  # polars cannot write bytes in a list
        buf.write(json.dumps(df.to_dicts(), default=_json_value).encode() + b"\n")
    elif fmt == "json":
        df.write_json(buf)
        buf.write(b"\n")
    elif fmt == "parquet":
        df.write_parquet(buf)
    else:
        raise TraceqlError(f"unknown format {fmt!r}; choose one of csv, json, parquet")
    return buf.getvalue()


FRAME_SUFFIXES = {".parquet": "parquet", ".csv": "csv", ".json": "json"}


def format_for(path: str | Path, option: str = "--out") -> str:
    """The frame format a file name asks for by its suffix; OptionError for any other suffix."""
    fmt = FRAME_SUFFIXES.get(Path(path).suffix.lower())
    if fmt is None:
        raise OptionError(f"{option} {path}: give a .parquet, .csv or .json file (the suffix picks the format)")
    return fmt


def write_frame(df: pl.DataFrame, path: Path, fmt: str) -> None:
    """Write a frame to ``path`` atomically in ``fmt``."""
    data = frame_bytes(df, fmt)
    atomic_write(path, lambda fh: fh.write(data))


def sink_parquet(rows: pl.LazyFrame, path: Path) -> None:
    """Write the rows of a lazy query (stored files read a part at a time) to ``path`` atomically as parquet,
    streamed on every core."""
    atomic_write(path, rows.sink_parquet)


def write_frames(parts: Iterable[pl.DataFrame], path: Path, fmt: str) -> None:
    """Write frames of one schema one after another to ``path`` atomically in ``fmt``, as one table, holding one
    part at a time (parquet: a row group each; csv: one header; json: one list of records)."""
    import pyarrow.parquet as pq

    def write(fh: IO[bytes]) -> None:
        writer, first = None, True
        if fmt == "json":
            fh.write(b"[")
        for part in parts:
            if fmt == "parquet":
                table = _writable(part, fmt).to_arrow()
                writer = writer or pq.ParquetWriter(fh, table.schema)
                writer.write_table(table)
            elif fmt == "csv":
                buf = io.BytesIO()
                _writable(part, fmt).write_csv(buf, include_header=first)
                fh.write(buf.getvalue())
                first = False
            elif records := frame_bytes(part, "json").strip()[1:-1]:
                fh.write((b"" if first else b",") + records)
                first = False
        if fmt == "json":
            fh.write(b"]\n")
        if writer is not None:
            writer.close()

    atomic_write(path, write)
