"""The activity relations (kernels, memory operations) finished once every source has added its rows: sorted,
checked (``validate``), given their steps (``steps``), and shown to SQL as views over the frames, which
``Trace.relation`` then hands out as they are."""

from __future__ import annotations

import polars as pl

from traceql.model import schema, steps, validate
from traceql.model.engine import Model, sort


def _gathered(table: str, staged: list[pl.DataFrame]) -> pl.DataFrame:
    types = {c: t for c, t in schema.held(table).items() if c not in schema.DERIVED}
    if not staged:
        return schema.empty(types)
    return pl.concat([f.cast(types) for f in staged], how="vertical", rechunk=False)


def _view(table: str) -> str:
    """The SQL view of an activity frame registered as ``_{table}_rows``: its Categorical columns as text."""
    cols = [f"{c}::VARCHAR AS {c}" if c in schema.CATEGORICAL.get(table, ()) else c
            for c in schema.RELATIONS[table]]
    return f"CREATE OR REPLACE TEMP VIEW {table} AS SELECT {', '.join(cols)} FROM _{table}_rows"


def finish(model: Model) -> tuple[dict[str, pl.DataFrame], list[str]]:
    """The model's activity frames, checked, sorted (``schema.ORDER_BY``) and with their steps, each also a view
    in ``model.con``; the ``steps`` relation filled; the warnings of the checks."""
    frames = {}
    for table in schema.ACTIVITIES:  # each frame handed on alone, so that the sort can let its columns go
        frames[table] = sort(_gathered(table, model.staged.pop(table)), schema.order(table))
    frames, notes = validate.check(model.con, frames)
    frames = steps.attribute(model.con, frames)
    for table, rows in frames.items():
        model.con.register(f"_{table}_rows", rows.select(schema.columns(table)).to_arrow())
        model.con.execute(_view(table))
    steps.fill(model.con)
    return frames, notes
