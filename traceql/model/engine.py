"""The DuckDB connection every trace lives in (SQLite scanner loaded offline), the model being read into
it (:class:`Model`), and the one way to put a polars frame into it."""

from __future__ import annotations

import itertools
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import duckdb
import numpy as np
import polars as pl

from traceql.errors import TraceqlError
from traceql.model import schema

BATCH_ROWS = 1 << 19


def _extension_directory() -> str:
    try:
        import duckdb_ext  # shipped by the duckdb-ext-sqlite package
    except ImportError as exc:  # pragma: no cover - a broken install
        raise TraceqlError(
            "the duckdb-ext-sqlite package is missing: reinstall traceql (pip install -e .)"
        ) from exc
    return str(Path(next(iter(duckdb_ext.__path__))) / "extensions")


THREADS_ENV = "TRACEQL_DUCKDB_THREADS"  # set in worker processes: each its share of the cores


_INSTANCES = itertools.count()


def spill_directory() -> Path:
    """A folder of its own for one DuckDB instance's spills (a large sort's), not yet made: DuckDB makes it when
    it first spills and removes it when the instance closes. Instances sharing one folder name their spill files
    alike and remove each other's (DuckDB 1.4): two processes that spill at once read each other's blocks or
    fail ("Could not read enough bytes"), and so would the exports of one run read on threads."""
    return Path(tempfile.gettempdir()) / f"traceql-duckdb-{os.getpid()}-{next(_INSTANCES)}"


def threads() -> int | None:
    """The threads this process's work is given (``$TRACEQL_DUCKDB_THREADS``: ``traceql.parallel`` gives each
    worker its share of the cores); None: every core."""
    given = os.environ.get(THREADS_ENV, "").strip()
    return int(given) if given.isdigit() and int(given) > 0 else None


def connect() -> duckdb.DuckDBPyConnection:
    """A fresh in-memory DuckDB connection able to ATTACH SQLite files, with no network access; it uses every
    core, or the number in ``$TRACEQL_DUCKDB_THREADS`` (:func:`threads`)."""
    given = threads()
    con = duckdb.connect(
        config={
            **({"threads": given} if given else {}),
            "extension_directory": _extension_directory(),
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            # the one extension loaded is the sqlite scanner of the duckdb-ext-sqlite wheel installed with
            # traceql; checking its signature again at every connection costs 65 ms (a run of 32 rank exports
            # opens a hundred connections), loading it unchecked 7 ms
            "allow_unsigned_extensions": True,
            # give freed memory back at once: the model is read into polars, then the connection closes
            "allocator_flush_threshold": "32MiB",
            "allocator_bulk_deallocation_flush_threshold": "32MiB",
            # where a large sort spills (a rank's whole activity): the temporary folder, never the user's own,
            # a folder of this instance's own
            "temp_directory": str(spill_directory()),
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
    """Create the model's empty tables in ``con`` (compressed), the activities' aside (:class:`Model`)."""
    _compressed(con)
    for name in schema.RELATIONS:
        if name not in schema.ACTIVITIES:
            con.execute(schema.ddl(name))


@dataclass
class Model:
    """A model being read: its small relations are tables in ``con``; the activities (kernels, memory
    operations: millions of rows) are polars frames that sources add (:meth:`add`), checked, sorted and given
    their steps once every source is in, then shown to SQL as views (``traceql.model.activities``)."""

    con: duckdb.DuckDBPyConnection
    staged: dict[str, list[pl.DataFrame]] = field(default_factory=lambda: {t: [] for t in schema.ACTIVITIES})
    # a part of a trace read alone (``traceql.sources.shards``): the communication kernels of other parts that ran
    # beside its own (``context``), and the table of the connection holding every activity of its ranks, narrow
    # (``activity``), where it has them
    context: list[pl.DataFrame] = field(default_factory=list)
    activity: str | None = None

    def add(self, table: str, frame: pl.DataFrame) -> None:
        """Add a source's rows of one activity relation: its source columns, in order (names may be
        Categorical)."""
        self.staged[table].append(frame.select(schema.source_columns(table)))


def frame(rel: duckdb.DuckDBPyRelation) -> pl.DataFrame:
    """A DuckDB result as a polars DataFrame, streamed in Arrow batches that polars keeps as they are: about
    a third of the memory of converting the whole result at once."""
    reader = rel.fetch_record_batch(BATCH_ROWS)
    # a record batch or a table gives a DataFrame
    frames = [cast(pl.DataFrame, pl.from_arrow(batch, rechunk=False)) for batch in reader]
    return (pl.concat(frames, rechunk=False) if frames
            else cast(pl.DataFrame, pl.from_arrow(reader.schema.empty_table())))


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


def _sort_keys(rows: pl.DataFrame, keys: list[str]) -> list[np.ndarray]:
    """``keys`` as numpy arrays for ``np.lexsort`` (least significant first): numbers as they are, text as its
    place among the column's distinct values, each nullable key after a flag that puts its nulls last."""
    arrays = []
    for key in keys:
        col = rows[key]
        values = col if col.dtype.is_numeric() else col.unique().sort(nulls_last=True).search_sorted(col)
        arrays.append(values.fill_null(0).to_numpy())
        if col.null_count():
            arrays.append(col.is_null().to_numpy())
    return arrays[::-1]


def sort(rows: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """``rows`` sorted by ``keys`` (nulls last, ties in their order), one column at a time: each unsorted
    column is let go as its sorted copy is made, so that the sort never holds two copies of a wide frame. A
    column is made one chunk before it is gathered (from several chunks a gather is about three times slower),
    which holds one more column at a time."""
    order = pl.Series(np.lexsort(_sort_keys(rows, keys)) if rows.height else [], dtype=pl.Int64)
    columns = rows.get_columns()
    del rows
    for i, column in enumerate(columns):
        columns[i] = column.rechunk().gather(order)
        del column
    return pl.DataFrame(columns)


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
