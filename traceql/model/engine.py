"""The DuckDB connection every trace lives in (SQLite scanner loaded offline), and the one way to put a
polars frame into it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from traceql.errors import TraceqlError
from traceql.model import schema

if TYPE_CHECKING:
    import polars as pl


def _extension_directory() -> str:
    try:
        import duckdb_ext  # shipped by the duckdb-ext-sqlite package
    except ImportError as exc:  # pragma: no cover - a broken install
        raise TraceqlError(
            "the duckdb-ext-sqlite package is missing: reinstall traceql (pip install -e .)"
        ) from exc
    return str(Path(next(iter(duckdb_ext.__path__))) / "extensions")


THREADS_ENV = "TRACEQL_DUCKDB_THREADS"  # set in worker processes: each its share of the cores


def connect() -> duckdb.DuckDBPyConnection:
    """A fresh in-memory DuckDB connection able to ATTACH SQLite files, with no network access; it uses every
    core, or the number in ``$TRACEQL_DUCKDB_THREADS`` (``traceql.parallel`` gives each worker its share)."""
    threads = os.environ.get(THREADS_ENV, "").strip()
    con = duckdb.connect(
        config={
            **({"threads": int(threads)} if threads.isdigit() and int(threads) > 0 else {}),
            "extension_directory": _extension_directory(),
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            # give freed memory back at once: the model is read into polars, then the connection closes
            "allocator_flush_threshold": "32MiB",
            "allocator_bulk_deallocation_flush_threshold": "32MiB",
        }
    )
    con.execute("SET enable_progress_bar = false")  # DuckDB's own bar on stderr: commands show their own
    try:
        con.execute("LOAD sqlite_scanner")
    except duckdb.Error as exc:
        raise TraceqlError(
            f"cannot load DuckDB's sqlite extension ({exc}); "
            f"duckdb {duckdb.__version__} needs the matching duckdb-ext-sqlite package"
        ) from exc
    return con


def _compressed(con: duckdb.DuckDBPyConnection) -> None:
    """Keep ``con``'s tables in a compressed in-memory database: a trace's kernel names repeat on every row,
    and its tables take about 15 times less memory compressed."""
    con.execute("ATTACH ':memory:' AS model (COMPRESS)")
    con.execute("USE model")


def create_relations(con: duckdb.DuckDBPyConnection) -> None:
    """Create the model's empty tables in ``con`` (compressed); sources then insert into them."""
    _compressed(con)
    for name in schema.RELATIONS:
        con.execute(schema.ddl(name))


def insert_frame(con: duckdb.DuckDBPyConnection, table: str, df: pl.DataFrame, *, select: str = "*",
                 replace: bool = False) -> None:
    """Insert ``df`` into ``table``'s source columns (``select`` is the SQL projection over the frame, named
    ``_frame``); with ``replace``, the table is created anew from it instead."""
    con.register("_frame", df.to_arrow())
    try:
        if replace:
            con.execute(f"CREATE OR REPLACE TABLE {table} AS SELECT {select} FROM _frame")
        else:
            con.execute(f"INSERT INTO {table} {into(table)} SELECT {select} FROM _frame")
    finally:
        con.unregister("_frame")


def into(table: str) -> str:
    """The column list of an INSERT into one of the model's relations: the columns sources fill."""
    return "(" + ", ".join(schema.source_columns(table)) + ")"


def sealed(con: duckdb.DuckDBPyConnection, names: list[str]) -> duckdb.DuckDBPyConnection:
    """The model's tables ``names`` moved into a fresh connection that never loaded the SQLite scanner and
    is closed to the outside: SQL over it can read and compute, but not read or write files, attach
    databases (an input could be changed through one), load extensions or reach the network, nor change
    that. ``con`` is closed."""
    out = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    try:
        _compressed(out)
        for name in names:
            out.register("_frame", con.table(name).arrow())
            out.execute(f"CREATE TABLE {name} AS SELECT * FROM _frame")
            out.unregister("_frame")
        out.execute("SET enable_external_access = false")
        out.execute("SET lock_configuration = true")
    except BaseException:
        out.close()
        raise
    finally:
        con.close()
    return out


def interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` is DuckDB reporting a Ctrl-C that landed inside a statement (it does not raise
    KeyboardInterrupt: an InterruptException, or a RuntimeError when the signal came between two tasks)."""
    return isinstance(exc, duckdb.InterruptException) or (
        isinstance(exc, RuntimeError) and str(exc).strip() == "Query interrupted")


def sql_literal(text: str) -> str:
    """Quote a string as a SQL literal (for statements such as ATTACH that take no parameters)."""
    return "'" + text.replace("'", "''") + "'"
