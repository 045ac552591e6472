"""A run labelled a rank at a time kept in the cache (``labelling.memo``) with its stored activities, so that
the next command that replays it starts from its labels: `ranks` or `whatif` after `detect` (or `detect` after
either) reads and labels the run once between them, and replays it.

What is kept is what the labels hand on (``by_rank``'s ``then``: the result before the command adds to it, and
``Kept``: the activities, zstd Arrow files a rank, their waits, late launches, breakdown, ranks); it is found by
the run's shards, the files and baselines as they are now, and the options the labels depend on. A command
served its labels says so (``memo.labels_served``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from traceql.labelling import memo
from traceql.labelling.kept import Kept, Then
from traceql.labelling.result import DetectResult
from traceql.sources.shards import Shard


@dataclass(frozen=True)
class Labelled:
    """A run's labels as its replay starts from them: ``result`` (before the command's own figures) and ``kept``
    (its ``mapper`` None: the pool that replays it is the command's)."""

    result: DetectResult
    kept: Kept


def key(shards: Sequence[Shard], baseline: Sequence[Path], options: dict[str, Any]) -> str | None:
    """The key of a run's labels: its ``shards`` (their files and parts), the ``baseline`` files and the
    labelling's ``options`` (plain values); None where results are not kept."""
    return memo.key("labelled", [*_files(shards), *baseline], {**options, "shards": [s.name for s in shards]})


def source(shards: Sequence[Shard]) -> str:
    """What ``cache info`` says a run's labels are of: the folder of its files, where they share one."""
    return of_files("labels", _files(shards))


def of_files(what: str, files: Sequence[Path]) -> str:
    """What ``cache info`` says ``what`` (labels, a replay) of a run's ``files`` is: the folder of the files,
    where they share one."""
    folders = {f.parent for f in files}
    return f"{what}: {folders.pop() if len(files) > 1 and len(folders) == 1 else ', '.join(map(str, files))}"


def _files(shards: Sequence[Shard]) -> list[Path]:
    return list(dict.fromkeys(f.path for s in shards for f in s.files))


def found(k: str | None) -> Labelled | None:
    """The labels kept under ``k``, None where there are none."""
    got = memo.load(k, labels=True)
    return got if isinstance(got, Labelled) else None


def keeping(k: str | None, then: Then, source: str) -> Then:
    """``then``, with the labels it is given kept under ``k`` first (``source``: what ``cache info`` lists)."""
    if k is None:
        return then

    def first(result: DetectResult, kept: Kept) -> None:
        memo.save(k, Labelled(result, replace(kept, mapper=None)), source)
        then(result, replace(kept, key=k))

    return first
