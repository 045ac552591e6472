"""The report's figures, drawn with plotly (its JavaScript is embedded in the page: no network)."""

from __future__ import annotations

from typing import cast

import plotly.graph_objects as go
import polars as pl
from plotly.subplots import make_subplots

from traceql.analyzers.units import size

# one meaning a colour, in every figure: red is a slowed kernel and nothing else
COLOURS = {"slowed": "#d62728", "compute": "#7f9fbf", "communication": "#ff9f1c", "memory": "#8c564b"}
IDLE = "#c7c7c7"
RANKS = ["#1f4e79", "#2e75b6", "#5b9bd5", "#9dc3e6", "#274e13", "#6aa84f", "#93c47d", "#b6d7a8"]  # no red
COLLECTIVES = ["#ff9f1c", "#cb7a00", "#ffcf8a", "#8a5300", "#ffe3bd"]  # communication's own orange
FONT = {"family": "system-ui, sans-serif", "size": 12}


def _layout(fig: go.Figure, height: int, **more: object) -> go.Figure:
    legend = {"orientation": "h", "yanchor": "top", "y": -0.12 * 400 / height, "x": 0,
              **cast("dict[str, object]", more.pop("legend", {}))}
    legend.setdefault("traceorder", "normal")  # in the order drawn (stacked bars would reverse it)
    fig.update_layout(height=height, margin={"l": 70, "r": 20, "t": 30, "b": 40}, font=FONT,
                      plot_bgcolor="white", legend=legend, **more)
    fig.update_xaxes(gridcolor="#eee")
    return fig


def step_timeline(frame: pl.DataFrame, step: int, own_clocks: bool = False) -> go.Figure:
    """One row per rank, one lane per stream: what step ``step`` ran, slowed kernels in red; with
    ``own_clocks``, each rank's times from its own first start (``analyzers.reports.step_timeline``)."""
    origin = "the rank's own first GPU work of the step" if own_clocks else "the step's first GPU work on any rank"
    ranks = frame.select("run_id", "rank").unique(maintain_order=True).rows()
    fig = make_subplots(rows=len(ranks), cols=1, vertical_spacing=min(0.3, 0.45 / len(ranks)),
                        subplot_titles=[f"{run} rank {rank}" for run, rank in ranks], shared_xaxes=True)
    for row, (run, rank) in enumerate(ranks, start=1):
        mine = frame.filter((pl.col("run_id") == run) & (pl.col("rank") == rank))
        for category in COLOURS:
            part = mine.filter(pl.col("category") == category)
            if part.is_empty():
                continue
            hover = [_hover(r) for r in part.iter_rows(named=True)]
            fig.add_trace(go.Bar(
                x=part["duration_ms"].to_list(), base=part["start_ms"].to_list(),
                y=[f"stream {s}" for s in part["stream"].to_list()], orientation="h", name=category,
                legendgroup=category, showlegend=row == 1, marker={"color": COLOURS[category], "line": {"width": 0}},
                hovertext=hover, hoverinfo="text"), row=row, col=1)
        fig.update_xaxes(title_text=f"ms from {origin}" if row == len(ranks) else None,
                         showticklabels=True, row=row, col=1)
    return _layout(fig, 160 + 160 * len(ranks), barmode="overlay", bargap=0.35)


def _hover(r: dict) -> str:
    text = f"<b>{r['name']}</b><br>{r['duration_ms'] * 1000:,.1f} µs at {r['start_ms']:.3f} ms"
    if r["ratio"] is not None:
        text += f"<br>{r['ratio']:.2f}x its baseline ({(r['baseline_ns'] or 0) / 1000:,.1f} µs)"
    if r["collective"]:
        text += f"<br>next to {r['collective']}"
    return text


def ratio_histogram(ratios: pl.DataFrame, threshold: float) -> go.Figure:
    """Slowdown ratios of overlapped kernels, one colour per collective they ran next to."""
    fig = go.Figure()
    for i, ((collective,), part) in enumerate(ratios.group_by("concurrent_comm", maintain_order=True)):
        fig.add_trace(go.Histogram(x=part["slowdown_ratio"].clip(upper_bound=3.0).to_list(), name=collective,
                                   xbins={"start": 0.5, "end": 3.05, "size": 0.05}, opacity=0.75,
                                   marker={"color": COLLECTIVES[i % len(COLLECTIVES)]}))
    fig.add_vline(x=threshold, line_dash="dash", line_color="#d62728",
                  annotation_text=f"case above {threshold}x", annotation_position="top right")
    return _layout(fig, 360, barmode="overlay", xaxis_title="duration / baseline (3 = 3 or more)",
                   yaxis_title="overlapped kernels")


def rank_breakdown(ranks: pl.DataFrame) -> go.Figure:
    """Per rank: compute, other GPU work and idle time (they add up to the span), and the overlap %."""
    labels = [f"{r} rank {k}" + ("" if p is None else f" · overlap {p:.1f} %")
              for r, k, p in ranks.select("run_id", "rank", "comm_comp_overlap_pct").rows()]
    fig = go.Figure()
    for col, name, colour in (("compute_ns", "compute", COLOURS["compute"]),
                              ("non_compute_ns", "communication and memory only", COLOURS["communication"]),
                              ("idle_ns", "idle", IDLE)):
        fig.add_trace(go.Bar(y=labels, x=(ranks[col] / 1e6).to_list(), name=name, orientation="h",
                             marker={"color": colour}))
    fig.update_layout(margin={"l": 230})
    height = 200 + 45 * len(labels)
    return _layout(fig, height, barmode="stack", xaxis_title="ms of the capture span",
                   legend={"orientation": "h", "yanchor": "top", "y": -90 / (height - 70), "x": 0})


def lost_per_step(cost: pl.DataFrame) -> go.Figure:
    """Time lost in each normal step, stacked by rank (the first captured step left out, as every total)."""
    fig = go.Figure()
    normal = cost.filter(pl.col("step") != pl.col("step").min().over("run_id"))
    for i, ((run, rank), part) in enumerate(normal.group_by("run_id", "rank", maintain_order=True)):
        fig.add_trace(go.Bar(x=[f"step {s}" for s in part["step"].to_list()], y=(part["time_lost_ns"] / 1e6).to_list(),
                             name=f"{run} rank {rank}", marker={"color": RANKS[i % len(RANKS)]}))
    return _layout(fig, 340, barmode="stack", yaxis_title="ms lost (sum over ranks)")


# each what-if as what it saves a step: (its column, less or more than the replay), its name, its colour
SAVINGS = {"straggler": ("without_straggler_ns", "without the straggler", "#9467bd"),
           "contention": ("without_contention_ns", "without contention", "#f4a6a6"),
           "exposed communication": ("without_communication_ns", "without communication's own time", "#ff9f1c"),
           "idle": ("without_idle_ns", "without idle (CPU launches at once)", IDLE),
           "overlap": ("serialized_ns", "overlap, against serialized", "#2ca02c")}


def whatif_savings(steps: pl.DataFrame) -> go.Figure:
    """Per normal step: what it would save without each cause (ms, from 0), and what overlap saves against
    communication serialized after computation (below 0 where overlap costs)."""
    normal = steps.filter(~pl.col("first"))
    runs = normal["run_id"].n_unique() > 1
    labels = [f"{r} step {s}" if runs else f"step {s}" for r, s in normal.select("run_id", "step").rows()]
    fig = go.Figure()
    for cause, (col, name, colour) in SAVINGS.items():
        if normal[col].is_null().all():
            continue
        saved = normal[col] - normal["replayed_ns"] if cause == "overlap" else normal["replayed_ns"] - normal[col]
        fig.add_trace(go.Bar(x=labels, y=(saved.clip(lower_bound=None if cause == "overlap" else 0) / 1e6).to_list(),
                             name=name, marker={"color": colour}))
    return _layout(fig, 360, barmode="group", yaxis_title="ms a step saves")


def dataset_cases(summary: pl.DataFrame) -> go.Figure:
    """Cases and time lost per model and configuration of a dataset."""
    labels = [f"{m} {c}" for m, c in summary.select("model", "config").rows()]
    fig = make_subplots(rows=1, cols=2, subplot_titles=["cases (% of the kernels decided)", "time lost (ms)"])
    fig.add_trace(go.Bar(x=labels, y=summary["case_pct"].to_list(), showlegend=False), row=1, col=1)
    fig.add_trace(go.Bar(x=labels, y=summary["time_lost_ms"].to_list(), showlegend=False), row=1, col=2)
    return _layout(fig, 380)


# a legend above a titled figure's plot, on the left: plotly's toolbar shows on the right, over what is there
TOP_LEFT = {"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0, "xanchor": "left"}


def _titled(fig: go.Figure, title: str) -> go.Figure:
    """``fig`` with ``title`` at its top left, above a legend there (:data:`TOP_LEFT`)."""
    fig.update_layout(title={"text": title, "x": 0, "xref": "paper", "xanchor": "left", "font": {"size": 13},
                             "y": 1, "yanchor": "top", "yref": "container", "pad": {"t": 8}},
                      margin={"t": 75})
    return fig


def collective_bandwidth(inst: pl.DataFrame, title: str) -> go.Figure:
    """Bus bandwidth of each instance of a step (x, in the order of the ``positions`` table), a marker per step
    and the median over the steps; the link's peak a dashed line where it is known. ``inst``: one run's
    instances (``analyzers.collectives.instances``) that have a bandwidth."""
    inst = inst.sort("collective", "instance", "step")
    ops = inst.select("collective", "op").unique()
    one = ops.height == 1  # one collective: its instances by number alone, its name on the axis
    name = pl.col("op") if ops["op"].n_unique() == ops.height else pl.col("collective")
    label = pl.format("#{}", "instance") if one else pl.format("{} #{}", name, "instance")
    inst = inst.with_columns(label.alias("_x"))
    axis = f"{ops['collective'][0]} #k: its k-th in the step" if one else "collective #k: its k-th in the step"
    shown = inst.select("_x", "step", "bytes", "transfer_ns", "busbw_gbps", "peak_share")
    hover = [f"<b>{x}</b>, step {s}<br>{size(b)} in {t / 1000:,.1f} µs<br>{g:,.1f} GB/s"
             + ("" if p is None else f", {p * 100:.0f} % of peak") for x, s, b, t, g, p in shown.rows()]
    fig = go.Figure(go.Scatter(x=inst["_x"].to_list(), y=inst["busbw_gbps"].to_list(), mode="markers",
                               name="each step", marker={"color": COLOURS["communication"], "size": 7, "opacity": 0.55},
                               hovertext=hover, hoverinfo="text"))
    median = inst.group_by("_x", maintain_order=True).agg(pl.col("busbw_gbps").median())
    fig.add_trace(go.Scatter(x=median["_x"].to_list(), y=median["busbw_gbps"].to_list(), mode="markers",
                             name="median over the steps",
                             marker={"color": "#8a5300", "size": 11, "symbol": "line-ew-open", "line": {"width": 3}}))
    peak = cast("float | None", inst["link_peak_gbps"].max())
    link = cast("str | None", inst["link"].drop_nulls().first())
    top = float(cast("float | None", inst["busbw_gbps"].max()) or 0)
    if peak is not None:
        fig.add_hline(y=peak, line_dash="dash", line_color="#555",
                      annotation_text=f"{link} peak {peak:,.0f} GB/s", annotation_position="top left")
        top = max(top, float(peak))
    fig.update_xaxes(tickangle=-60 if not one else 0, title_text=f"instance of a step ({axis})")
    fig = _layout(fig, 440, yaxis_title="bus bandwidth (GB/s)", yaxis_rangemode="tozero",
                  yaxis_range=[0, top * 1.12], legend=TOP_LEFT)
    return _titled(fig, title)


def collective_skew(steps: pl.DataFrame, title: str) -> go.Figure:
    """Per step: the arrival skew summed over its collectives (ms), coloured by the rank that held the others
    longest (``analyzers.collectives.step_last``), how long it held them written on the bar."""
    runs = steps["run_id"].n_unique() > 1
    fig = go.Figure()
    for rank in sorted(set(steps["last_rank"].to_list())):
        part = steps.filter(pl.col("last_rank") == rank)
        labels = [f"{r} step {s}" if runs else f"step {s}" for r, s in part.select("run_id", "step").rows()]
        fig.add_trace(go.Bar(x=labels, y=(part["skew_ns"] / 1e6).to_list(), name=f"rank {rank} arrived last",
                             marker={"color": RANKS[rank % len(RANKS)]},
                             text=[f"rank {rank}: held {h / 1e6:,.2f} ms" for h in part["held_ns"].to_list()],
                             textposition="outside", cliponaxis=False,
                             hovertext=[f"{n} collectives, skew {k / 1e6:,.3f} ms; rank {rank} held the others "
                                        f"{h / 1e6:,.3f} ms" for n, k, h in part.select("instances", "skew_ns",
                                                                                         "held_ns").rows()],
                             hoverinfo="text"))
    order = [f"{r} step {s}" if runs else f"step {s}" for r, s in steps.select("run_id", "step").rows()]
    fig.update_xaxes(categoryorder="array", categoryarray=order)
    fig = _layout(fig, 360, barmode="overlay", yaxis_title="arrival skew (ms, summed)",
                  legend=TOP_LEFT)
    return _titled(fig, title)
