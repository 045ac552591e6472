"""`traceql cache info | clear`: the columnar copies of the exports read so far (``sources.mirror``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from traceql.sources import mirror


@dataclass(frozen=True)
class CacheInfo:
    """Where the copies are, whether commands use them, their bound, and each copy: its folder, bytes, last use
    (epoch seconds) and the export it was made from (oldest use first)."""

    folder: Path
    enabled: bool
    limit: int
    copies: list[tuple[Path, int, float, str]]

    @property
    def total(self) -> int:
        return sum(c[1] for c in self.copies)

    def to_dict(self) -> dict[str, Any]:
        return {"folder": str(self.folder), "enabled": self.enabled, "limit_bytes": self.limit,
                "bytes": self.total,
                "copies": [{"export": source, "bytes": size, "last_used": used, "folder": str(where)}
                           for where, size, used, source in self.copies]}


def turn_off(off: bool) -> None:
    """``--no-cache``: this command (and the workers it starts) reads every export itself.

    Args:
        off: True for ``--no-cache``; False undoes an earlier command's in the same process (never the
            environment's own ``TRACEQL_NO_CACHE``).
    """
    mirror.turn_off(off)


def info() -> CacheInfo:
    """The cache as it is now.

    Returns:
        its folder, whether commands use it, its bound and every copy (:class:`CacheInfo`).
    """
    return CacheInfo(mirror.folder(), mirror.enabled(), mirror.limit(), mirror.entries())


def clear() -> tuple[int, int]:
    """Every copy removed (the exports themselves are never touched).

    Returns:
        how many copies were removed, and their bytes.
    """
    return mirror.clear()
