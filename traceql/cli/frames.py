"""A query's result on the terminal: a table of its first rows, or one block per row when a table cannot fit."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.markup import escape
from rich.table import Table

from traceql.cli.common import console, plain_table

if TYPE_CHECKING:
    import polars as pl


def frame_table(df: pl.DataFrame, *, title: str | None = None, limit: int = 50) -> Table:
    """A rich table of the first ``limit`` rows of a frame; text folds, numbers stay whole."""
    out = plain_table(title)
    for col, dtype in zip(df.columns, df.dtypes, strict=True):
        numeric = dtype.is_numeric()
        out.add_column(col, justify="right" if numeric else "left", overflow="fold", no_wrap=numeric,
                       min_width=len(col) if numeric else None)
    for row in df.head(limit).iter_rows():
        out.add_row(*("" if v is None else escape(str(v)) for v in row))
    return out


def _natural_width(df: pl.DataFrame) -> int:
    """The width a frame's table needs to show every header and number whole (text capped at 24)."""
    import polars as pl  # loads with the analysis, not for `traceql collect`

    total = 0
    for col, dtype in zip(df.columns, df.dtypes, strict=True):
        cells = df[col].cast(pl.String).str.len_chars().max() or 0
        total += max(len(col), cells if dtype.is_numeric() else min(cells, 24)) + 2
    return total


MAX_CELL = 4096  # characters of one value a table shows: of a longer one, says how many more it holds


def _cells(df: pl.DataFrame) -> pl.DataFrame:
    """A frame's values as a table shows them: nested ones (lists, structs) as their text, long ones cut."""
    import polars as pl  # loads with the analysis, not for `traceql collect`

    out = {}
    for col, dtype in zip(df.columns, df.dtypes, strict=True):
        if dtype.is_numeric() or dtype == pl.Boolean:
            out[col] = df[col]
            continue
        values = [None if v is None else str(v) for v in df[col].to_list()]
        out[col] = pl.Series(col, [v if v is None or len(v) <= MAX_CELL else
                                   f"{v[:MAX_CELL]} [and {len(v) - MAX_CELL:,} more characters: --format csv "
                                   "or json shows all]" for v in values], pl.String)
    return pl.DataFrame(out)


def print_frame(df: pl.DataFrame, *, limit: int = 50, more: bool | None = None) -> None:
    """A frame's first ``limit`` rows as a table; as one block of ``column  value`` lines per row when a table
    cannot fit. ``more``: whether rows follow that ``df`` does not hold (default: whether it holds more)."""
    shown = _cells(df.head(limit))
    if _natural_width(shown) <= console.width:
        console.print(frame_table(shown, limit=limit))
    else:
        name_width = max(map(len, df.columns), default=0)
        for i, row in enumerate(shown.iter_rows(named=True)):
            console.print(f"[bold]-- row {i + 1} --[/bold]")
            for col, value in row.items():
                console.print(f"{col.ljust(name_width)}  {escape('' if value is None else str(value))}",
                              overflow="fold", highlight=False)
    if more or (more is None and df.height > limit):
        rows = "more rows" if more else f"{df.height - limit:,} more rows"
        console.print(f"… {rows} (use --format csv/json/parquet or --output for all)")
