"""Small frames made from a large one, given buffers of their own before the large one is dropped.

A polars frame filtered, grouped or gathered from a larger one keeps the larger one's string buffers alive (its
strings are views into them), and one sliced from it (``head``, ``slice``) its every column. The
``collectives`` relation of a run read a shard at a time keeps each shard's communication kernels: undetached,
they held the shards' timelines (the 32-rank run: 2.3 GB at the peak, 0.6 GB detached). `detect`'s passes keep
each shard's parts until the run's end: undetached, its clock samples (the first kernels of each run, cut from
the shard's kernels) held buffers of them (the 32-rank run: 15 MiB a rank, 430 MiB through labels and replay)."""

from __future__ import annotations

import io
from dataclasses import fields, is_dataclass, replace
from typing import Any, TypeVar, cast

import polars as pl

T = TypeVar("T")


def detached(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` copied into buffers of its own (written to Arrow's IPC format in memory and read back: every
    column copied, strings, slices and all), its dtypes as they were."""
    sink = io.BytesIO()
    frame.write_ipc(sink, compression="uncompressed")
    sink.seek(0)
    return pl.read_ipc(sink)


def detached_fields(found: T) -> T:
    """``found`` (a dataclass) with each of its frames, and each frame of its tuples, :func:`detached`."""
    assert is_dataclass(found) and not isinstance(found, type)
    changed: dict[str, Any] = {}
    for f in fields(found):
        value: Any = getattr(found, f.name)
        if isinstance(value, pl.DataFrame):
            changed[f.name] = detached(value)
        elif isinstance(value, tuple) and value and all(isinstance(v, pl.DataFrame) for v in value):
            changed[f.name] = tuple(detached(v) for v in value)
    return cast(T, replace(found, **changed))
