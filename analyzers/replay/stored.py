"""A run's activities stored a file a rank (or a part of one), each sorted by its *bucket* (``windows``: its
step, or between steps the step before it on its rank), so that a window of steps reads a slice of each file,
not the whole run (:class:`Stored`: `detect`, `ranks` and `whatif` of a run of rank files; kept in the cache
with the run's labels, ``labelling.reused``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.ipc as ipc


class Span(Protocol):
    """What a window of steps (``windows.Window``) says of the activities it holds."""

    @property
    def run_id(self) -> str: ...

    @property
    def bounds(self) -> tuple[int, int]: ...

    def holds(self) -> pl.Expr: ...


Frame = TypeVar("Frame", pl.DataFrame, pl.LazyFrame)  # a frame, eager or lazy: the same kind back
BUCKET = "_bucket"
# the record batches a stored file is written in: a window reads those of its slice alone (at 32 ranks a window
# holds some 8,000 rows of each file: batches of 65,536 rows read, and unpacked, eight times what it holds)
BATCH_ROWS = 8_192
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
        parts, tables = [], []
        for path, (buckets, rows, n) in zip(self.files, self.index, strict=True):
            if n < 0:
                parts.append(_decoded(pl.scan_ipc(path).filter(w.holds())).collect())
                continue
            a, b = np.searchsorted(buckets, lo), np.searchsorted(buckets, hi, side="right")
            start, end = (rows[a] if a < len(rows) else n), (rows[b] if b < len(rows) else n)
            if end > start:
                table = _batches(path, int(start), int(end), n)
                if table is None:
                    part = pl.scan_ipc(path).slice(int(start), int(end - start)).filter(pl.col("run_id") == w.run_id)
                    parts.append(_decoded(part).collect())
                else:
                    tables.append(table)
        if tables:  # read alike, made one frame at once (a frame a file cost as much again)
            got = pl.from_arrow(pa.concat_tables(tables))
            assert isinstance(got, pl.DataFrame)  # a table, not an array
            parts.append(_decoded(got.filter(pl.col("run_id") == w.run_id)))  # a file of one run, maybe another's
        return pl.concat(parts) if parts else self.scan().clear().collect()


def _batches(path: Path, start: int, end: int, n: int) -> pa.Table | None:
    """Rows ``start`` .. ``end`` of a stored file of ``n`` rows, from the record batches that hold them alone
    (:data:`BATCH_ROWS` each but the last); None where its batches are not so (not written by
    :meth:`Stored.write`). Read through pyarrow, the file opened once a window: polars' scan of a slice cost
    about 6 ms a file and window (the 32-rank run's 66 windows of 32 files: 14.4 s; this way 4.0 s)."""
    with pa.OSFile(str(path)) as source:
        reader = ipc.open_file(source)
        if reader.num_record_batches != -(-n // BATCH_ROWS):
            return None
        first, last = start // BATCH_ROWS, (end - 1) // BATCH_ROWS
        batches = [reader.get_batch(i) for i in range(first, last + 1)]
    if [b.num_rows for b in batches] != [min(BATCH_ROWS, n - i * BATCH_ROWS) for i in range(first, last + 1)]:
        return None
    return pa.Table.from_batches(batches).slice(start - first * BATCH_ROWS, end - start)


def _decoded(ops: Frame) -> Frame:
    """``ops`` (lazy, they stay lazy) with the columns stored encoded as text (:data:`ENCODED`)."""
    names = ops.collect_schema().names()
    return ops.with_columns(pl.col(c).cast(pl.String) for c in ENCODED if c in names)
