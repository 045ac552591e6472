"""The one way traceql writes a file: a temp file beside it, renamed into place when complete (readers never
see a partial file, a killed writer leaves nothing half-written), with the mode any new file of the user gets."""

from __future__ import annotations

import io
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING

from traceql.errors import OptionError, TraceqlError

if TYPE_CHECKING:
    import polars as pl


def _user_file_mode() -> int:
    """The mode open() gives a new file: 0666 less the process's umask."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def atomic_write(path: Path, write: Callable[[IO[bytes]], None]) -> None:
    """Write ``path`` through ``write(fh)`` into a temp file beside it, then rename it into place."""
    path = Path(path)
    if path.is_dir():
        raise TraceqlError("is a directory; give a file name for the output", path=str(path))
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise TraceqlError("output directory does not exist", path=str(parent))
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent)
    except OSError as exc:
        raise TraceqlError(f"cannot write here: {exc.strerror} (a read-only folder?)", path=str(path)) from None
    try:
        os.fchmod(fd, _user_file_mode())  # mkstemp makes the file private (0600)
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise TraceqlError(f"cannot write: {exc.strerror} (disk full or no permission?)", path=str(path)) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
