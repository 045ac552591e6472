"""A run's activities stored a file a rank (or a part of one), each sorted by its *bucket* (``windows``: its
step, or between steps the step before it on its rank), so that a window of steps reads a slice of each file,
not the whole run (:class:`Stored`: `detect`, `ranks` and `whatif` of a run of rank files; kept in the cache
with the run's labels, ``labelling.reused``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import polars as pl


class Span(Protocol):
    """What a window of steps (``windows.Window``) says of the activities it holds."""

    @property
    def run_id(self) -> str: ...

    @property
    def bounds(self) -> tuple[int, int]: ...

    def holds(self) -> pl.Expr: ...

BUCKET = "_bucket"
BATCH_ROWS = 65_536  # the record batches a stored file is written in (a window reads those of its slice)
BEFORE_ALL = -(2**31)  # the bucket of what came before a rank's first step
# stored dictionary-encoded, read back as text: every kernel's collective column holds its short name, and as
# text a scan of every rank's files for their communication holds each row's name before the filter drops it
# (459 of 547 MB at 32 ranks; 39 MB encoded)
ENCODED = ("collective",)


def with_buckets(ops: pl.DataFrame) -> pl.DataFrame:
    """``ops`` with each activity's bucket (module doc), where they have none."""
    if BUCKET in ops.columns:
        return ops
    bucket = pl.col("step").forward_fill().over("run_id", "rank", order_by="start_ns").fill_null(BEFORE_ALL)
    return ops.with_columns(bucket.cast(pl.Int32).alias(BUCKET))


def bucketed(ops: pl.DataFrame) -> pl.DataFrame:
    """``ops`` with their buckets, sorted by run, bucket and start, ties in their order (as :class:`Stored`
    keeps them). A rank's activities are of one run: sorted by their numbers alone (their run's text as a key
    made the sort five times as long)."""
    ops = with_buckets(ops)
    keys = [BUCKET, "start_ns"] if ops["run_id"].n_unique() <= 1 else ["run_id", BUCKET, "start_ns"]
    return ops.sort(keys, maintain_order=True)


@dataclass(frozen=True)
class Stored:
    """A run's activities stored a file a rank (or a part of one), each file :func:`bucketed`: ``index`` gives,
    per file, its buckets (ascending) and the row each begins at, so that a window is a slice of each."""

    files: tuple[Path, ...]
    index: tuple[tuple[np.ndarray, np.ndarray, int], ...]  # per file: buckets, first rows, rows
    holder: Any = field(default=None, compare=False, repr=False)  # what keeps the files, where they were lent

    @staticmethod
    def write(ops: pl.DataFrame, path: Path) -> tuple[np.ndarray, np.ndarray, int]:
        """``ops`` (of one file) :func:`bucketed` into ``path``, in zstd record batches of :data:`BATCH_ROWS` (a
        thirteenth of the bytes, as fast to write and read: what `detect` keeps of them, ``labelling.memo``, is
        small); the file's index (:meth:`of`)."""
        ops = bucketed(ops)
        ops.with_columns(pl.col(c).cast(pl.Categorical) for c in ENCODED if c in ops.columns).write_ipc(
            path, compression="zstd", record_batch_size=BATCH_ROWS)
        return Stored.of(ops)

    @staticmethod
    def of(ops: pl.DataFrame) -> tuple[np.ndarray, np.ndarray, int]:
        """The index of one file's activities (:func:`bucketed`); none (a file read whole for every window)
        where they are of several runs."""
        if ops["run_id"].n_unique() > 1:
            return np.empty(0, np.int64), np.empty(0, np.int64), -1
        at = ops.select(pl.col(BUCKET).rle_id().arg_unique().alias("row"))["row"].to_numpy()
        return ops[BUCKET].to_numpy()[at].astype(np.int64), at.astype(np.int64), ops.height

    def scan(self) -> pl.LazyFrame:
        """Every file's activities, as they were written (a filter on another column goes before the text is
        made: :data:`ENCODED`)."""
        return _decoded(pl.scan_ipc(list(self.files)))

    def window(self, w: Span) -> pl.DataFrame:
        """The activities ``w`` holds: a slice of each file."""
        lo, hi = w.bounds
        parts = []
        for path, (buckets, rows, n) in zip(self.files, self.index, strict=True):
            if n < 0:
                parts.append(_decoded(pl.scan_ipc(path).filter(w.holds())).collect())
                continue
            a, b = np.searchsorted(buckets, lo), np.searchsorted(buckets, hi, side="right")
            start, end = (rows[a] if a < len(rows) else n), (rows[b] if b < len(rows) else n)
            if end > start:  # the record batches of the slice alone are read (:data:`BATCH_ROWS`)
                part = pl.scan_ipc(path).slice(int(start), int(end - start))
                parts.append(_decoded(part.filter(pl.col("run_id") == w.run_id)).collect())
        return pl.concat(parts) if parts else self.scan().clear().collect()


def _decoded(ops: pl.LazyFrame) -> pl.LazyFrame:
    names = ops.collect_schema().names()
    return ops.with_columns(pl.col(c).cast(pl.String) for c in ENCODED if c in names)
