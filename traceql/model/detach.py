"""Small frames made from a large one, given buffers of their own before the large one is dropped.

A polars frame filtered, grouped or sliced from a larger one keeps the larger one's string buffers alive: its
strings are views into them. The ``collectives`` relation of a run read a shard at a time keeps each shard's
communication kernels: undetached, they held the shards' timelines (the 32-rank run: 2.3 GB at the peak, 0.6 GB
detached). `detect`'s passes keep their parts undetached: measured there, the same peak either way."""

from __future__ import annotations

from dataclasses import fields, is_dataclass, replace
from typing import Any, TypeVar, cast

import polars as pl

T = TypeVar("T")


def detached(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` copied into buffers of its own (through Arrow's plain strings), its dtypes as they were."""
    if not any(dtype == pl.String or dtype.is_nested() for dtype in frame.dtypes):
        return frame  # no string views to hold anything
    return cast(pl.DataFrame, pl.from_arrow(frame.to_arrow(compat_level=pl.CompatLevel.oldest()))).cast(
        frame.schema)


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
