"""What an nsys export records of its collectives' sizes: NCCL's NVTX ranges and their payloads
(``analyzers.collectives``' ``BY_CALL`` frame).

NCCL (2.19 and later) wraps each call (``ncclAllReduce`` …) in an NVTX range of its domain ``NCCL`` whose
extended payload holds the communicator, the message size in bytes and the reduction. nsys keeps the payload
schemas (``NVTX_PAYLOAD_SCHEMA_ENTRIES``) in every export, but the values only when the report was exported with
``--include-blobs=true`` (nsys 2024.2 and later; `traceql collect` does), in ``NVTX_EVENTS.binaryData``: a count
of payloads, then per payload its schema id, size and offset (three little-endian 64-bit integers), then the
payloads. NCCL's size of an all-gather is what each rank sends, of a reduce-scatter what each receives: the
whole buffer (nccl-tests' size) is that times the ranks.
"""

from __future__ import annotations

import sqlite3
import struct
from pathlib import Path

import polars as pl

FROM_NVTX = "NCCL NVTX payload"
SIZE_ENTRY = "Message size [bytes]"
PER_RANK = ("ncclAllGather", "ncclReduceScatter")
_EMPTY = {"run_id": pl.String, "rank": pl.Int32, "start_ns": pl.Int64, "end_ns": pl.Int64, "bytes": pl.Int64,
          "dtype": pl.String, "group_size": pl.Int32, "size_from": pl.String}


def _sizes(blob: bytes, offsets: dict[int, int]) -> int | None:
    """The message size in the first payload of ``blob`` whose schema has one (``offsets``: schema id → the
    size's offset in its payload)."""
    if len(blob) < 8:
        return None
    (count,) = struct.unpack_from("<Q", blob, 0)
    for i in range(min(count, (len(blob) - 8) // 24)):
        schema, size, at = struct.unpack_from("<QQQ", blob, 8 + 24 * i)
        where = offsets.get(schema)
        if where is not None and where + 8 <= size and at + where + 8 <= len(blob):
            return struct.unpack_from("<Q", blob, at + where)[0]
    return None


def read(path: Path, pids: dict[int, tuple[str, int]], world: int) -> pl.DataFrame:
    """The NCCL calls of the export at ``path`` with a message size: their CPU interval and bytes, as rows of the
    rank of their process (``pids``: process id → (run_id, rank); others are left out); ``world``: the ranks of
    the run (an all-gather's size is what one rank sends). Empty for an export that records none."""
    rows: dict[str, list] = {c: [] for c in ("run_id", "rank", "start_ns", "end_ns", "bytes")}
    try:
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        con.text_factory = lambda b: b.decode("utf-8", "replace")  # names need not be UTF-8 (nsys_text)
        try:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not {"NVTX_EVENTS", "NVTX_PAYLOAD_SCHEMA_ENTRIES", "StringIds"} <= tables:
                return pl.DataFrame(schema=_EMPTY)
            cols = {r[1] for r in con.execute("PRAGMA table_info(NVTX_EVENTS)")}
            if "binaryData" not in cols:
                return pl.DataFrame(schema=_EMPTY)
            offsets = {schema: at or 0 for schema, at in con.execute(
                "SELECT schemaId, offset FROM NVTX_PAYLOAD_SCHEMA_ENTRIES WHERE name = ?", [SIZE_ENTRY])}
            found = con.execute("""
                SELECT n.start, n."end", n.globalTid, coalesce(n.text, s.value), CAST(n.binaryData AS BLOB)
                FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId
                WHERE n.binaryData IS NOT NULL AND n."end" IS NOT NULL""").fetchall()
        finally:
            con.close()
    except sqlite3.Error:
        return pl.DataFrame(schema=_EMPTY)
    for start, end, tid, text, blob in found:
        owner = pids.get((int(tid or 0) >> 24) & 0xFFFFFF)
        size = _sizes(bytes(blob), offsets)
        if owner is None or size is None or not isinstance(text, str) or not text.startswith("nccl"):
            continue
        for key, value in zip(rows, (*owner, start, end, size * (world if text in PER_RANK else 1)), strict=True):
            rows[key].append(value)
    return pl.DataFrame(rows, schema={c: _EMPTY[c] for c in rows}).with_columns(
        pl.lit(None, pl.String).alias("dtype"), pl.lit(None, pl.Int32).alias("group_size"),
        pl.lit(FROM_NVTX).alias("size_from")).select(*_EMPTY)
