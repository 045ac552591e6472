"""What the first 100 bytes of a SQLite database (its header) say: that it is one, whether the file holds every
page the header counts, and whether it is in WAL mode. Nothing here opens the database."""

from __future__ import annotations

import struct
from pathlib import Path

from traceql.errors import InputError

MAGIC = b"SQLite format 3\x00"


def check_complete(path: Path, head: bytes, size: int) -> None:
    """Refuse a SQLite file whose header promises more pages than the file holds."""
    if len(head) < 100:
        raise InputError(f"truncated SQLite database ({size} bytes, shorter than its header)", path=str(path))
    (page_size,) = struct.unpack(">H", head[16:18])
    page_size = 65536 if page_size == 1 else page_size
    change_counter, page_count = struct.unpack(">II", head[24:32])
    (valid_for,) = struct.unpack(">I", head[92:96])
    if valid_for == change_counter and page_count:
        expected = page_size * page_count
        if size < expected:
            raise InputError(
                f"truncated SQLite database ({size} of {expected} bytes): "
                "the copy or the export did not finish",
                path=str(path),
            )


def in_wal_mode(head: bytes) -> bool:
    """Whether the database is in WAL mode (its read and write versions are 2): SQLite would create -wal and
    -shm files beside it to read it."""
    return head[18:20] == b"\x02\x02"
