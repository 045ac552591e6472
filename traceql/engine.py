"""The DuckDB connection every trace lives in, with the SQLite scanner loaded offline."""

from __future__ import annotations

from pathlib import Path

import duckdb

from traceql.errors import TraceqlError


def _extension_directory() -> str:
    try:
        import duckdb_ext  # shipped by the duckdb-ext-sqlite package
    except ImportError as exc:  # pragma: no cover - a broken install
        raise TraceqlError(
            "the duckdb-ext-sqlite package is missing: reinstall traceql (pip install -e .)"
        ) from exc
    return str(Path(next(iter(duckdb_ext.__path__))) / "extensions")


def connect() -> duckdb.DuckDBPyConnection:
    """A fresh in-memory DuckDB connection able to ATTACH SQLite files, with no network access."""
    con = duckdb.connect(
        config={
            "extension_directory": _extension_directory(),
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
        }
    )
    try:
        con.execute("LOAD sqlite_scanner")
    except duckdb.Error as exc:
        raise TraceqlError(
            f"cannot load DuckDB's sqlite extension ({exc}); "
            f"duckdb {duckdb.__version__} needs the matching duckdb-ext-sqlite package"
        ) from exc
    return con


def sql_literal(text: str) -> str:
    """Quote a string as a SQL literal (for statements such as ATTACH that take no parameters)."""
    return "'" + text.replace("'", "''") + "'"
