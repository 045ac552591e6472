"""A trace: input files normalized into one DuckDB connection, queried with SQL, read as polars frames."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.dataset  # noqa: F401 - loaded now: DuckDB imports it mid-query, where Ctrl-C must not land

from traceql.errors import QueryError
from traceql.model import activities, engine, schema
from traceql.sources import inputs, registry, shards
from traceql.sources.shards import Shard


def _query_error(exc: duckdb.Error) -> QueryError:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, duckdb.CatalogException):
        first += f" (the model's relations: {', '.join(schema.RELATIONS)}; and collectives, made when named)"
    elif isinstance(exc, duckdb.PermissionException):
        first += " (SQL here reads the model alone; `traceql query ... --output FILE` saves a result)"
    return QueryError(f"SQL failed: {first}")


AS_TEXT = ("INTERVAL", "BIT", "UNION", "TIME WITH TIME ZONE", "VARINT", "BIGNUM")  # types polars cannot hold


def _polars(rel: Any) -> pl.DataFrame | Exception:
    """``rel.pl()``, or what went wrong: polars raises on some Arrow types and panics (an exception outside
    Python's Exception) on others nested in a list."""
    try:
        return rel.pl()
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - a panic of polars' Rust code is a BaseException
        if isinstance(exc, duckdb.Error) or engine.interrupted(exc):
            raise
        return Exception(str(exc))


def _frame(rel: Any) -> pl.DataFrame:
    """A result as a polars frame, a column of a type polars lacks (an INTERVAL, a BIT string, a list of them)
    as its text; QueryError for a result polars cannot hold even so."""
    relation = isinstance(rel, duckdb.DuckDBPyRelation)  # else a cursor (SQL with parameters): read as it is
    texts = {c for c, t in zip(rel.columns, rel.types, strict=True) if any(k in str(t).upper() for k in AS_TEXT)} \
        if relation else set()
    if texts:
        names = [f'"{c.replace(chr(34), chr(34) * 2)}"' for c in rel.columns]
        rel = rel.project(", ".join(f"CAST({n} AS VARCHAR) AS {n}" if c in texts else n
                                    for c, n in zip(rel.columns, names, strict=True)))
    got = _polars(rel)
    if isinstance(got, pl.DataFrame):
        return got
    why = str(got).strip().splitlines()[0] if str(got).strip() else "a type polars lacks"
    raise QueryError(f"the result cannot be read into a table ({why[:200]}): cast that column, e.g. to VARCHAR")


class _Relation:
    """A property that reads the relation of its own name as a polars DataFrame."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, trace: Trace | None, owner: type | None = None) -> Any:
        return self if trace is None else trace.relation(self.name)


class Trace:
    """The normalized model of one or more trace files (see ``traceql.model.schema``).

    Relations: ``runs``, ``ranks``, ``kernels``, ``memcpy``, ``nvtx``, ``gpus``, ``kernel_metrics``,
    ``kernel_metric_units``. Each is a DuckDB table
    in :attr:`con`; :meth:`sql` queries them, :meth:`relation` reads one as a polars DataFrame.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, paths: list[Path], notes: list[str] | None = None,
                 frames: dict[str, pl.DataFrame] | None = None) -> None:
        self._con = con
        self._frames = frames or {}  # the activity relations, as ``activities.finish`` left them
        self._sealed = False
        self._derived: list[str] = []  # relations computed from the model on demand (``add_relation``)
        self.paths = paths
        self.notes = notes or []  # what reading had to do differently: copies made, rows dropped
        self.closed = False
        # a part of a file read alone: other parts' communication beside its kernels, and the table (of the
        # connection, before it is sealed: ``own_sql``) holding its ranks' whole activity, narrow
        self.context: pl.DataFrame | None = None
        self.activity: str | None = None

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The DuckDB connection holding the model, sealed (``engine.sealed``) before any SQL of the caller's
        reaches it; reading relations alone (``detect``) never pays for the sealed copy."""
        if not self._sealed:
            self._con = engine.sealed(self._con, [*schema.RELATIONS, *self._derived])
            self._sealed = True
        return self._con

    def add_relation(self, name: str, frame: pl.DataFrame) -> None:
        """``frame`` as relation ``name`` beside the model's, for the SQL that follows: a relation computed from
        the model (``collectives``), added before the first :meth:`sql`."""
        self._open()
        if self._sealed:
            raise QueryError(f"relation {name} is added after SQL ran: add it first")
        self._con.register("_frame", frame.to_arrow())
        try:
            self._con.execute(f'CREATE TABLE "{name}" AS SELECT * FROM _frame')
        finally:
            self._con.unregister("_frame")
        self._derived.append(name)

    def _open(self) -> None:
        if self.closed:
            raise QueryError("this trace is closed: use it inside its `with read_trace(...)` block, "
                             "or before close()")

    def sql(self, query: str, params: Sequence[Any] | None = None, *, limit: int | None = None) -> pl.DataFrame:
        """Run SQL over the model's relations and return the result as a polars DataFrame (its first ``limit``
        rows only, when given: the rest is never computed); a Ctrl-C while it runs raises KeyboardInterrupt."""
        self._open()
        try:
            rel = self.con.execute(query, params) if params is not None else self.con.sql(query)
            if rel is None:  # a statement with no result set
                return pl.DataFrame()
            if limit is not None and isinstance(rel, duckdb.DuckDBPyRelation):
                rel = rel.limit(limit)
            return _frame(rel)
        except (duckdb.Error, RuntimeError) as exc:
            if engine.interrupted(exc):
                raise KeyboardInterrupt from None
            if isinstance(exc, duckdb.Error):
                raise _query_error(exc) from exc
            raise

    def own_sql(self, query: str, params: Sequence[Any] | None = None) -> pl.DataFrame:
        """SQL that traceql's own commands wrote (never a caller's): run over the model as read, without
        sealing it first (``con``); the same errors as :meth:`sql`."""
        self._open()
        if self._sealed:
            return self.sql(query, params)
        try:
            return (self._con.execute(query, params) if params is not None else self._con.sql(query)).pl()
        except duckdb.Error as exc:
            if engine.interrupted(exc):
                raise KeyboardInterrupt from None
            raise _query_error(exc) from exc

    def own_batches(self, query: str, params: Sequence[Any], rows: int) -> Iterator[pa.RecordBatch]:
        """:meth:`own_sql`'s result in Arrow batches of at most ``rows`` rows, each made as it is taken (a
        result too large to hold at once); the same errors."""
        self._open()
        try:
            yield from self._con.execute(query, params).fetch_record_batch(rows)
        except duckdb.Error as exc:
            if engine.interrupted(exc):
                raise KeyboardInterrupt from None
            raise _query_error(exc) from exc

    def relation(self, name: str, *, compact: bool = False) -> pl.DataFrame:
        """One relation of the model as a polars DataFrame; with ``compact``, its long repeated strings
        (``schema.CATEGORICAL``: kernel names) come as Categorical, one dictionary instead of a string per row."""
        self._open()
        if name not in schema.RELATIONS:
            raise QueryError(f"no relation {name!r}; the model has: {', '.join(schema.RELATIONS)}")
        if name in self._frames:
            rows = self._frames[name]
            return rows if compact else rows.cast({c: pl.String for c in schema.CATEGORICAL.get(name, ())})
        rel = self._con.sql(f"SELECT * FROM {name}")  # sorted after: polars sorts faster
        return engine.sort(engine.frame(rel), schema.order(name))

    kernels = _Relation()
    memcpy = _Relation()
    nvtx = _Relation()
    gpus = _Relation()
    runs = _Relation()
    ranks = _Relation()

    def close(self) -> None:
        self._frames = {}
        try:
            self._con.interrupt()  # a query a Ctrl-C left streaming would otherwise hold close() until it ends
            self._con.close()
        except duckdb.ConnectionException:  # closed already: a Ctrl-C landed while it was being sealed
            pass
        self.closed = True

    def __enter__(self) -> Trace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Trace({', '.join(str(p) for p in self.paths)})"


def read_trace(paths: str | Path | Sequence[str | Path] | None = None, *, shard: Shard | None = None) -> Trace:
    """Open trace files (or folders of them) as one normalized :class:`Trace`.

    With no paths, the embedded default trace shipped in ``datasets/``. Files that each hold one rank
    and carry it in their name (``*_rank0.sqlite``, ``*_rank1.sqlite``) form one run; a file with one
    process per GPU gives its ranks in process order. Inputs are opened read-only. With ``shard``
    (``traceql.sources.shards``), that part of a run alone, as it is in its run.
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    checked = list(shard.files) if shard is not None else inputs.resolve(list(paths) if paths else None)
    con = engine.connect()
    try:
        engine.create_relations(con)
        model = engine.Model(con)
        notes = shards.load(model, shard) if shard is not None else registry.load(model, checked)
        frames, dropped = activities.finish(model)
    except BaseException:
        con.close()
        raise
    trace = Trace(con, [f.path for f in checked], notes + dropped, frames)
    trace.context, trace.activity = _extra(model.context), model.activity
    return trace


def _extra(frames: list[pl.DataFrame]) -> pl.DataFrame | None:
    """What a part read alone carries beside the model (``engine.Model.context``, ``.activity``), if any."""
    return pl.concat(frames, how="vertical_relaxed") if frames else None
