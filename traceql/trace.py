"""A trace: input files normalized into one DuckDB connection, queried with SQL, read as polars frames."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from traceql import engine, inputs, model
from traceql.errors import QueryError
from traceql.sources import kineto, ncu, nsys
from traceql.sources.ranks import assign_ranks


def _query_error(exc: duckdb.Error) -> QueryError:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, duckdb.CatalogException):
        first += f" (the model's relations: {', '.join(model.RELATIONS)})"
    return QueryError(f"SQL failed: {first}")


class Trace:
    """The normalized model of one or more trace files (see ``traceql.model``).

    Relations: ``runs``, ``ranks``, ``kernels``, ``memcpy``, ``nvtx``, ``gpus``, ``kernel_metrics``,
    ``kernel_metric_units``. Each is a DuckDB table
    in :attr:`con`; :meth:`sql` queries them, :meth:`relation` reads one as a polars DataFrame.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, paths: list[Path]) -> None:
        self.con = con
        self.paths = paths

    def sql(self, query: str, params: Sequence[Any] | None = None) -> pl.DataFrame:
        """Run SQL over the model's relations and return the result as a polars DataFrame."""
        try:
            rel = self.con.execute(query, params) if params is not None else self.con.sql(query)
        except duckdb.Error as exc:
            raise _query_error(exc) from exc
        if rel is None:  # a statement with no result set
            return pl.DataFrame()
        try:
            return rel.pl()
        except duckdb.Error as exc:
            raise _query_error(exc) from exc

    def relation(self, name: str) -> pl.DataFrame:
        """One relation of the model as a polars DataFrame."""
        if name not in model.RELATIONS:
            raise QueryError(f"no relation {name!r}; the model has: {', '.join(model.RELATIONS)}")
        return self.con.sql(f"SELECT * FROM {name} ORDER BY {model.ORDER_BY[name]}").pl()

    @property
    def kernels(self) -> pl.DataFrame:
        return self.relation("kernels")

    @property
    def memcpy(self) -> pl.DataFrame:
        return self.relation("memcpy")

    @property
    def nvtx(self) -> pl.DataFrame:
        return self.relation("nvtx")

    @property
    def gpus(self) -> pl.DataFrame:
        return self.relation("gpus")

    @property
    def runs(self) -> pl.DataFrame:
        return self.relation("runs")

    @property
    def ranks(self) -> pl.DataFrame:
        return self.relation("ranks")

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Trace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Trace({', '.join(str(p) for p in self.paths)})"


def read_trace(paths: str | Path | Sequence[str | Path] | None = None) -> Trace:
    """Open trace files (or folders of them) as one normalized :class:`Trace`.

    With no paths, the embedded default trace shipped in ``datasets/``. Files that each hold one rank
    and carry it in their name (``*_rank0.sqlite``, ``*_rank1.sqlite``) form one run; a file with one
    process per GPU gives its ranks in process order. Inputs are opened read-only.
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    checked = inputs.resolve(list(paths) if paths else None)
    con = engine.connect()
    try:
        model.create_relations(con)
        groups: dict[str | None, list[inputs.InputFile]] = {}
        for f in checked:
            groups.setdefault(f.run, []).append(f)
        alias = 0
        for run, files in groups.items():
            attached = []
            for f in (f for f in files if f.fmt == "nsys-sqlite"):
                attached.append(nsys.attach(con, f.path, f"src{alias}"))
                alias += 1
            if attached:
                nsys.load(con, attached, assign_ranks({f.path: f.pids for f in attached}, run))
            for f in attached:
                con.execute(f"DETACH {f.alias}")
            parsed = [kineto.parse(f.path, cpu_run=f.cpu_run) for f in files if f.fmt == "kineto-json"]
            if parsed:
                for kf, run_id, rank, how in kineto.assign(parsed, run):
                    kineto.load(con, kf, run_id, rank, how)
        ncu.load(con, [ncu.read_ncu(f.path) for f in checked if f.fmt == "ncu-csv"])
    except BaseException:
        con.close()
        raise
    return Trace(con, [f.path for f in checked])
