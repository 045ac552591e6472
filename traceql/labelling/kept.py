"""What a run labelled a rank at a time (``labelling.by_rank``) hands on to what follows its labels (a verdict's
replay: `detect`'s causes, `ranks`, `whatif`) while its activities are still stored."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

from traceql.analyzers.replay.stored import Stored
from traceql.analyzers.replay.windows import Mapper
from traceql.labelling.result import DetectResult


@dataclass(frozen=True)
class Kept:
    """A run's activities stored a file a rank (``stored``), its recorded stream waits, a ``mapper`` that replays
    windows of them on the run's pool (None: on threads here), the launches its GPUs waited for (``late``:
    ``labelling.late``), its steps' breakdown (``breakdown``: ``step_breakdown``, every rank's), its ranks
    (``run_id``, ``rank``), the names of the GPUs its kernels ran on, its collectives' operations
    (``analyzers.collectives.operations``), its trace files and the key of its labels in the cache."""

    stored: Stored
    waits: pl.DataFrame | None
    mapper: Mapper | None
    late: pl.DataFrame | None
    breakdown: pl.DataFrame | None
    ranks: pl.DataFrame
    gpus: list[str | None]
    collectives: set[str]
    paths: list[str]
    key: str | None = None  # the key its labels are kept under (``labelling.reused``), where they are


# what follows the labels: ``then(result, kept)``
Then = Callable[[DetectResult, Kept], None]
