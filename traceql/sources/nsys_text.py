"""Text in an Nsight Systems export that is not UTF-8.

An NVTX range named by a program in Latin-1, or a damaged string, puts bytes into the export that are not
UTF-8; DuckDB refuses to read such a column at all. The text columns the model reads are probed once after
the export is attached; where one holds such bytes, the export is read from a temporary copy whose bad
values are decoded with U+FFFD in place of the bytes, and a warning says how many values that changed.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import cast

import duckdb

# the text columns the model reads, by table (META_DATA_EXPORT: schema 3.x; EXPORT_META_DATA: schema 2.x)
TEXT_COLUMNS = {
    "StringIds": ("value",),
    "NVTX_EVENTS": ("text",),
    "TARGET_INFO_GPU": ("name", "busLocation"),
    "META_DATA_EXPORT": ("name", "value"),
    "EXPORT_META_DATA": ("name", "value"),
}
def readable(con: duckdb.DuckDBPyConnection, alias: str, tables: set[str]) -> bool:
    """Whether every text column the model reads of the attached export is UTF-8. DuckDB checks text only
    where it keeps it (a table, a result): here each value is checked by decoding its bytes."""
    for table, columns in TEXT_COLUMNS.items():
        if table not in tables:
            continue
        # encode(): the value's own bytes (a cast to BLOB would read "\\x.." in the text as an escape)
        bad = " OR ".join(f'("{c}" IS NOT NULL AND TRY(decode(encode("{c}"))) IS NULL)' for c in columns)
        if cast("tuple[int]", con.execute(f"SELECT count(*) FROM {alias}.{table} WHERE {bad}").fetchone())[0]:
            return False
    return True


def _decoded(value: bytes) -> str:
    return value.decode("utf-8", errors="replace")


def clean_copy(source: Path, copy: Path, tables: set[str]) -> int:
    """Copy ``source`` to ``copy`` and decode there every text value that is not UTF-8 (bytes that are not
    UTF-8 become U+FFFD); the number of values changed. ``source`` is only read."""
    shutil.copyfile(source, copy)
    con = sqlite3.connect(copy)
    con.text_factory = bytes
    changed = 0
    try:
        for table, columns in TEXT_COLUMNS.items():
            if table not in tables:
                continue
            for column in columns:
                bad = []
                for rowid, value in con.execute(f'SELECT rowid, "{column}" FROM "{table}" '
                                                f"WHERE typeof(\"{column}\") = 'text'"):
                    try:
                        value.decode("utf-8")
                    except UnicodeDecodeError:
                        bad.append((_decoded(value), rowid))
                con.executemany(f'UPDATE "{table}" SET "{column}" = ? WHERE rowid = ?', bad)
                changed += len(bad)
        con.commit()
    finally:
        con.close()
    return changed
