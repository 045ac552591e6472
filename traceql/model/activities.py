"""The activity relations (kernels, memory operations) finished once every source has added its rows: sorted,
checked (``validate``), given their steps (``step_attribution``), and shown to SQL as views over the frames, which
``Trace.relation`` then hands out as they are."""

from __future__ import annotations

import polars as pl

from traceql.model import schema, step_attribution, validate
from traceql.model.engine import Model, sort


def _gathered(model: Model, table: str, staged: list[pl.DataFrame]) -> tuple[pl.DataFrame, list[str]]:
    """The sources' rows of one activity relation as one frame of the model's types, and the warnings on
    values that do not fit them (``validate.narrowed``)."""
    types = {c: t for c, t in schema.held(table).items() if c not in schema.DERIVED}
    if not staged:
        return schema.empty(types), []
    parts = [validate.narrowed(model.con, table, f, types) for f in staged]
    return pl.concat([f for f, _ in parts], how="vertical", rechunk=False), [n for _, said in parts for n in said]


def _view(table: str) -> str:
    """The SQL view of an activity frame registered as ``_{table}_rows``: its Categorical columns as text."""
    cols = [f"{c}::VARCHAR AS {c}" if c in schema.CATEGORICAL.get(table, ()) else c
            for c in schema.RELATIONS[table]]
    return f"CREATE OR REPLACE TEMP VIEW {table} AS SELECT {', '.join(cols)} FROM _{table}_rows"


def finish(model: Model) -> tuple[dict[str, pl.DataFrame], list[str]]:
    """The model's activity frames, checked, sorted (``schema.ORDER_BY``) and with their steps, each also a view
    in ``model.con``; the ``steps`` relation filled; the warnings of the checks (values that do not fit the
    model's types, rows dropped, step ranges ignored)."""
    frames: dict[str, pl.DataFrame] = {}
    narrowed: list[str] = []
    for table in schema.ACTIVITIES:  # each frame handed on alone, so that the sort can let its columns go
        rows, said = _gathered(model, table, model.staged.pop(table))
        frames[table], narrowed = sort(rows, schema.order(table)), narrowed + said
    frames, notes = validate.check(model.con, frames)
    frames, ignored = step_attribution.attribute(model.con, frames)
    for table, rows in frames.items():
        model.con.register(f"_{table}_rows", rows.select(schema.columns(table)).to_arrow())
        model.con.execute(_view(table))
    step_attribution.fill(model.con)
    return frames, narrowed + notes + ignored
