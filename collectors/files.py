"""traceql's one way to write a file, for the collectors and the rest of traceql alike: into a temp name beside
it, flushed to disk, then renamed into place, so a reader (or a killed run) never sees a half-written file and
a crash right after leaves the whole file or the old one. The file gets the mode any new file of the user gets."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

TEMP_GLOB = ".*.tmp*"  # what an interrupted atomic write leaves beside its file (see atomic_path)


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_folder(path: Path) -> None:
    """The rename on disk too; where a file system cannot sync a folder, the file's own sync must do."""
    try:
        _sync(path)
    except OSError:
        pass


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temp path beside ``path`` (no file there yet: the block, or a tool it runs, writes it); when
    the block ends without error and the file exists, it is flushed to disk and becomes ``path``.

    The temp name is unique (two writers never share it) and keeps ``path``'s suffix (``nsys export``
    insists on ``.sqlite``)."""
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp{path.suffix}")
    try:
        yield tmp
        if tmp.exists():
            _sync(tmp)
            os.replace(tmp, path)
            _sync_folder(path.parent if str(path.parent) else Path("."))
    finally:
        tmp.unlink(missing_ok=True)


def write_json(path: Path, data: dict[str, Any]) -> Path:
    """Write ``data`` as JSON to ``path`` atomically (creating its folder)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(data, indent=1, default=str))
    return path
