"""One Nsight Systems export ATTACHed read-only: checked to be an export the model can read (its kernels
recorded), its tables found by name and its metadata read; and one line for what goes wrong reading it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import duckdb

from traceql.errors import InputError, SchemaError
from traceql.model.engine import interrupted, sql_literal
from traceql.sources import mirror
from traceql.sources.nsys_text import clean_copy, readable

KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"
META_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")  # schema 3.x, schema 2.x
SESSION_START = "TARGET_INFO_SESSION_START_TIME"


@dataclass
class NsysFile:
    """One attached export: its DuckDB alias, its tables, what its metadata says, when its session started (ns
    since the epoch; its times count from there) and the processes that ran kernels (``pids``: known once the
    reader has read its kernels)."""

    path: Path
    alias: str
    tables: set[str]
    tool_version: str | None
    schema_version: str | None
    session_start_ns: int | None
    pids: list[int]
    notes: list[str]


# what SQLite says of a file whose pages are damaged (SQLITE_CORRUPT, SQLITE_NOTADB, SQLITE_TOOBIG ...)
DAMAGED = ("database disk image is malformed", "file is not a database", "malformed database schema",
           "string or blob too big", "unsupported file format")
# what can go wrong while DuckDB's SQLite scanner reads an export: its own errors, SQLite's errors raised
# while results stream (RuntimeError), and messages that quote bytes that are not UTF-8
READ_ERRORS = (duckdb.Error, RuntimeError, UnicodeDecodeError)
FOUND = re.compile(r'found ".*" (?=of type)', re.DOTALL)


def empty_kernels(path: Path) -> SchemaError:
    """The export recorded no kernel: its capture range never started."""
    return SchemaError(f"the {KERNEL_TABLE} table is empty: did the capture range ever start "
                       "(cudaProfilerStart / --capture-range) before the program exited?", path=str(path))


def _message(exc: BaseException) -> str:
    if isinstance(exc, UnicodeDecodeError) and isinstance(exc.object, (bytes, bytearray)):
        text = bytes(exc.object).decode("utf-8", errors="replace")
    else:
        text = str(exc)
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__


def fail(path: Path, exc: BaseException) -> BaseException:
    """One line for what went wrong reading an export: a damaged file, a value of the wrong type or out of
    range, a table or column the model needs and the export lacks, or a file SQLite cannot read. A Ctrl-C
    that DuckDB reported is KeyboardInterrupt."""
    if interrupted(exc):
        return KeyboardInterrupt()
    msg = FOUND.sub("found a value ", _message(exc))  # the value itself may be any bytes
    damage = next((d for d in DAMAGED if d in msg), None)
    if damage:
        return InputError(f"damaged SQLite database ({damage}): re-export it with nsys export", path=str(path))
    if "Mismatch Type" in msg:
        return InputError(f"a column holds values of the wrong type ({msg}): damaged, or written by another tool?",
                          path=str(path))
    if msg.startswith(("Out of Range Error", "Conversion Error")):
        return InputError(f"a column holds a value out of range ({msg}): damaged, or written by another tool?",
                          path=str(path))
    if msg.startswith(("Binder Error", "Catalog Error")):
        return SchemaError(f"the export lacks a table or column the model needs ({msg}): made by an nsys version "
                           "traceql does not know, or altered?", path=str(path))
    return InputError(f"cannot read this SQLite database ({msg}); is the file complete?", path=str(path))


def _attach(con: duckdb.DuckDBPyConnection, path: Path, alias: str, source: Path) -> set[str]:
    """ATTACH ``source`` read-only as ``alias``; its table names (errors name ``path``)."""
    try:
        con.execute(f"ATTACH {sql_literal(str(source))} AS {alias} (TYPE SQLITE, READ_ONLY)")
        return {  # from SQLite's own catalog: DuckDB's would read every attached table's columns
            r[0] for r in con.execute(
                "SELECT name FROM sqlite_scan(?, 'sqlite_master') WHERE type = 'table'", [str(source)]
            ).fetchall()
        }
    except READ_ERRORS as exc:
        raise fail(path, exc) from exc


def attach(con: duckdb.DuckDBPyConnection, path: Path, alias: str, *, read_from: Path | None = None,
           scratch: Path | None = None) -> NsysFile:
    """One export as ``alias``: its columnar copy where the cache holds one (``mirror``), else the export
    ATTACHed read-only (from ``read_from``, a copy, when given), checked to have what the model needs and
    copied into the cache; errors name ``path``. Where a text column the model reads holds bytes that are not
    UTF-8, the export is read from a copy in ``scratch`` with those values decoded (``nsys_text``), said in its
    notes."""
    entry = mirror.lookup(path) if read_from is None else None
    if entry is not None and mirror.use(con, entry, alias):
        meta = entry.meta
        return NsysFile(path, alias, set(entry.tables), meta["tool_version"], meta["schema_version"],
                        meta["session_start_ns"], [], list(meta["notes"]))
    f = _attached(con, path, alias, read_from=read_from, scratch=scratch)
    if read_from is None:  # a WAL database's copy is not the file: never kept
        meta = {"tool_version": f.tool_version, "schema_version": f.schema_version,
                "session_start_ns": f.session_start_ns, "notes": f.notes}
        entry = mirror.build(con, alias, path, f.tables, meta)
        if entry is not None:
            con.execute(f"DETACH {alias}")
            if not mirror.use(con, entry, alias):  # removed meanwhile: the export itself, again
                _attach(con, path, alias, path)
            f.tables = set(entry.tables)
    return f


def detach(con: duckdb.DuckDBPyConnection, alias: str) -> None:
    """Let go of an export :func:`attach` gave as ``alias``."""
    if con.execute("SELECT 1 FROM duckdb_databases() WHERE database_name = ?", [alias]).fetchall():
        con.execute(f"DETACH {alias}")
    else:
        con.execute(f"DROP SCHEMA IF EXISTS {alias} CASCADE")


def _attached(con: duckdb.DuckDBPyConnection, path: Path, alias: str, *, read_from: Path | None,
              scratch: Path | None) -> NsysFile:
    tables = _attach(con, path, alias, read_from or path)
    meta = next((t for t in META_TABLES if t in tables), None)
    if meta is None and "StringIds" not in tables:
        raise InputError(
            "a SQLite database, but not an Nsight Systems export (no META_DATA_EXPORT or StringIds table)",
            path=str(path),
        )
    if KERNEL_TABLE not in tables:
        raise SchemaError(
            f"no {KERNEL_TABLE} table: the capture recorded no CUDA kernels (was it run with `-t cuda`?)",
            path=str(path),
        )
    notes = []
    try:
        utf8 = readable(con, alias, tables)
    except READ_ERRORS as exc:
        raise fail(path, exc) from exc
    if not utf8 and scratch is not None:
        con.execute(f"DETACH {alias}")
        copy = scratch / f"{alias}-utf8-{path.name}"
        changed = clean_copy(read_from or path, copy, tables)
        _attach(con, path, alias, copy)
        notes.append(f"warning: {path}: {changed:,} text values (names, NVTX ranges) hold bytes that are not UTF-8: "
                     "read from a temporary copy, those bytes shown as U+FFFD")
    try:
        info = dict(con.execute(f"SELECT name, value FROM {alias}.{meta}").fetchall()) if meta else {}
        start = cast("tuple[Any]", con.execute(f"SELECT min(utcEpochNs) FROM {alias}.{SESSION_START}").fetchone())[0] \
            if SESSION_START in tables else None
    except READ_ERRORS as exc:
        raise fail(path, exc) from exc
    return NsysFile(path, alias, tables, info.get("EXPORT_PRODUCT_VERSION"), info.get("EXPORT_SCHEMA_VERSION"),
                    start, [], notes)
