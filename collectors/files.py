"""The collectors' one way to write a file: into a temp name beside it, renamed into place when complete,
so a reader (or a killed run) never sees a half-written file."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temp path beside ``path``; when the block ends without error it becomes ``path``.

    The temp name keeps ``path``'s suffix (``nsys export`` insists on ``.sqlite``)."""
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.tmp{path.suffix}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_json(path: Path, data: dict[str, Any]) -> Path:
    """Write ``data`` as JSON to ``path`` atomically (creating its folder)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(data, indent=1, default=str))
    return path
