"""`traceql cache info | clear`: the columnar copies of the exports read so far (``sources.mirror``) and the
results commands kept (``labelling.memo``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from traceql.sources import mirror

# the kept results (``labelling.memo``) are loaded where they are listed or served, not by ``turn_off``, which
# every command calls: it loads polars, which `collect`'s host may lack


@dataclass(frozen=True)
class CacheInfo:
    """Where the copies are, whether commands use them, their bound, and each copy and each result kept: its
    folder, bytes, last use (epoch seconds) and what it was made from (an export; a command and its inputs),
    oldest use first."""

    folder: Path
    enabled: bool
    limit: int
    copies: list[tuple[Path, int, float, str]]
    results: list[tuple[Path, int, float, str]]
    results_enabled: bool = True

    @property
    def total(self) -> int:
        return sum(c[1] for c in [*self.copies, *self.results])

    def to_dict(self) -> dict[str, Any]:
        return {"folder": str(self.folder), "enabled": self.enabled, "limit_bytes": self.limit,
                "bytes": self.total,
                "copies": [{"export": source, "bytes": size, "last_used": used, "folder": str(where)}
                           for where, size, used, source in self.copies],
                "results_enabled": self.results_enabled,
                "results": [{"of": source, "bytes": size, "last_used": used, "folder": str(where)}
                            for where, size, used, source in self.results]}


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
    from traceql.labelling import memo

    copies, results = _kinds(mirror.entries())
    return CacheInfo(mirror.folder(), mirror.enabled(), mirror.limit(), copies, results, memo.enabled())


def clear() -> tuple[int, int, int]:
    """Every copy and every result kept removed (the exports themselves are never touched).

    Returns:
        how many copies and how many results were removed, and their bytes.
    """
    results = len(_kinds(mirror.entries())[1])
    n, nbytes = mirror.clear()
    return n - results, results, nbytes


Entry = tuple[Path, int, float, str]


def _kinds(found: list[Entry]) -> tuple[list[Entry], list[Entry]]:
    """The cache's entries (``mirror.entries``) as the copies of exports and the results kept (``labelling.memo``'s
    folders)."""
    from traceql.labelling import memo

    results = [e for e in found if e[0].name.startswith(memo.PREFIX)]
    return [e for e in found if not e[0].name.startswith(memo.PREFIX)], results


@dataclass
class Served:
    """When what a command was served from the cache was computed (seconds since the epoch): whole results
    (``results``), the labels a replay started from (``labels``; the rest computed now), and the replays of
    them another command made (``replays``)."""

    results: list[float]
    labels: list[float]
    replays: list[float] = field(default_factory=list)


@contextmanager
def answered() -> Iterator[Served]:
    """What is served from the cache while inside.

    Returns:
        a :class:`Served` that gets, on leaving, when each result served, and the labels each replay started
        from, were computed (both empty where every answer was computed).
    """
    from traceql.labelling import memo

    memo.served(), memo.labels_served(), memo.replays_served()  # those served before are not this command's
    got = Served([], [])
    try:
        yield got
    finally:
        got.results.extend(memo.served())
        got.labels.extend(memo.labels_served())
        got.replays.extend(memo.replays_served())
