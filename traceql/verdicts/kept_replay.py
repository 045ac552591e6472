"""A run labelled a rank at a time replayed once for the two verdicts that replay it, and the replay kept.

`detect` prices its causes from a replay whose what-ifs start from the trace as measured (``pricing``); `ranks`
and `whatif` from the trace as replayed, with every what-if (``ranks``). Both read the same stored activities
and build the same graphs; they differ in where the what-ifs start and in the stragglers they name. The first
of them to replay a run (with the cache on) replays each window both ways from one read and one set of graphs
(``replay.windowed_modes``) and keeps each way's steps in the cache (``labelling.memo``), found by the run's
labels' key (``Kept.key``) and the way; the other command, later, starts from that replay (and says so). A way
whose windows are not the first's (`detect`'s sample of a long run's steps) is left to its own command.

What each way gives is what it gives alone (tests hold it): the same windows, the same graph, the same replay.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from traceql.analyzers import replay
from traceql.labelling import memo, reused
from traceql.labelling.kept import Kept


@dataclass(frozen=True)
class Way:
    """How a verdict replays a run's stored activities: its name and what else tells it apart (``tag``: plain
    values), ``replay.windowed``'s options (``sample`` and the what-ifs' among them), the slowdown cases as the
    replay marks them (``cases``), what is done to each window once read (``prepare``), and the runs left out
    (``unaligned``: their ranks' clocks disagree)."""

    tag: dict[str, Any]
    options: dict[str, Any]
    cases: pl.DataFrame
    prepare: Callable[[pl.DataFrame], pl.DataFrame]
    unaligned: tuple[str, ...] = ()


def replayed(kept: Kept, own: Way, other: tuple[dict[str, Any], Callable[[], Way | None]] | None = None
             ) -> replay.WhatIf:
    """``kept``'s activities replayed ``own``'s way: kept from an earlier command where it replayed them so,
    else replayed now, and with them the ``other`` way (its tag, and what makes it: None where it does not
    replay the run) where that is not kept yet and can share the windows."""
    mine = _key(kept, own.tag)
    got = memo.load(mine, replay=True)
    if isinstance(got, replay.WhatIf):
        return got
    ways = [own]
    theirs = _key(kept, other[0]) if other is not None and mine is not None else None
    if other is not None and theirs is not None and not memo.holds(theirs):  # not read: not served
        way = other[1]()
        if way is not None and _alike(own, way):
            ways.append(way)
    done = replay.windowed_modes(kept.stored, [w.options for w in ways], mapper=kept.mapper, cases=own.cases,
                                 prepare=own.prepare)
    files = [Path(p) for p in kept.paths]
    for k, way, one in zip([mine, theirs], ways, done, strict=False):
        if one is not None:
            memo.save(k, one, reused.of_files(f"replay for {way.tag['way']}", files))
    first = done[0]
    assert first is not None  # the first way is always replayed
    return first


def _key(kept: Kept, tag: dict[str, Any]) -> str | None:
    """The key of a way's replay of ``kept`` (None where the labels are not kept: nothing to find it by)."""
    return None if kept.key is None else memo.key("replayed", [], {"labels": kept.key, **tag})


def _alike(own: Way, other: Way) -> bool:
    """Whether ``other`` replays the windows ``own`` reads as they are read for it: the same runs, the same cases
    (every run's clocks agreeing, so that each window is put on its run's clock alike)."""
    if own.unaligned or other.unaligned or own.cases.columns != other.cases.columns:
        return False
    order = own.cases.columns
    return own.cases.sort(order, nulls_last=True).equals(other.cases.sort(order, nulls_last=True))
