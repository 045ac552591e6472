"""The report page: one self-contained HTML file (plotly's JavaScript inline, no network), figures from
``traceql.export.figures`` and tables of the result."""

from __future__ import annotations

import html
import time
from collections.abc import Sequence

import plotly.graph_objects as go
import plotly.io as pio
import polars as pl
from plotly.offline import get_plotlyjs

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 1840px; color: #222; padding: 0 1.5rem; }
p, ol { max-width: 75rem; } .lead { font-size: 1.1rem; font-weight: 600; margin: .3rem 0; }
h1 { font-size: 1.5rem; margin-bottom: .2rem; } h2 { font-size: 1.15rem; margin-top: 2rem; }
.sub { color: #666; margin-top: 0; } .note { color: #555; font-size: 13px; }
.tbl { max-width: 100%; overflow-x: auto; }
table { border-collapse: collapse; margin: .5rem 0; max-width: 100%; }
td, th { padding: .25rem .6rem; border-bottom: 1px solid #e4e4e4; overflow-wrap: anywhere; }
td.n, th.n, td.w { white-space: nowrap; }
.plotly-graph-div { max-width: 100%; }
th { text-align: left; background: #f6f6f6; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
.warn { background: #fff5e6; border-left: 3px solid #ff9f1c; padding: .4rem .8rem; }
"""


def figure(fig: go.Figure) -> str:
    """A figure's markup, drawing with the page's one copy of plotly.js."""
    return pio.to_html(fig, full_html=False, include_plotlyjs=False, config={"displaylogo": False})


def table(rows: Sequence[Sequence[object]], header: Sequence[str], *, numeric: Sequence[bool] = (),
          whole: Sequence[str] = ()) -> str:
    """An HTML table in a box as wide as the page (a wider table scrolls inside it); cells are escaped; numeric
    columns right-aligned and whole, the ``whole`` columns whole too (a collective's name, a grid), other text
    wraps (a long kernel name anywhere)."""
    numeric = list(numeric) or [False] * len(header)
    kinds = ["n" if num else ("w" if h in whole else "") for h, num in zip(header, numeric, strict=True)]

    def cell(tag: str, value: object, kind: str) -> str:
        if kind:
            return f"<{tag} class='{kind}'>{html.escape(str(value))}</{tag}>"
        # text folds after its separators first (a kernel name at its underscores), anywhere only past them
        return f"<{tag}>{html.escape(str(value)).replace('_', '_<wbr>').replace('/', '/<wbr>')}</{tag}>"

    head = "".join(cell("th", h, "n" if k == "n" else "") for h, k in zip(header, kinds, strict=True))
    body = "".join("<tr>" + "".join(cell("td", v, k) for v, k in zip(row, kinds, strict=True)) + "</tr>"
                   for row in rows)
    return f"<div class='tbl'><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"


def frame_table(df: pl.DataFrame) -> str:
    """A frame as an HTML table."""
    return table([["" if v is None else v for v in row] for row in df.iter_rows()], df.columns,
                 numeric=[t.is_numeric() for t in df.dtypes])


def page(title: str, subtitle: str, sections: Sequence[tuple[str, str]], notes: Sequence[str] = (),
         lead: str = "") -> str:
    """The whole page: a title, its ``lead`` (the finding that matters most), warnings, then (heading, markup)
    sections."""
    warn = "".join(f"<p class='warn'>{html.escape(n)}</p>" for n in notes)
    body = "".join(f"<section><h2>{html.escape(h)}</h2>{content}</section>" for h, content in sections)
    made = time.strftime("%Y-%m-%d %H:%M")
    first = f"<p class='lead'>{html.escape(lead)}</p>" if lead else ""
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style><script>{get_plotlyjs()}</script></head><body>"
            f"<h1>{html.escape(title)}</h1>{first}<p class='sub'>{html.escape(subtitle)} · made {made} by traceql</p>"
            f"{warn}{body}</body></html>")
