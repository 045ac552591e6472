"""A run replayed from its trace (``traceql.analyzers.replay``) with its labels and its stragglers, as it was and
without each cause; per run, a verdict a person can act on (`whatif`; `ranks` prices its stragglers with it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import polars as pl

from traceql.analyzers import replay
from traceql.analyzers.causes import ranking, sentence
from traceql.analyzers.replay.activities import activities, on_clock, with_labels
from traceql.labelling.inputs import Timeline
from traceql.labelling.result import DetectResult
from traceql.model import step_marker
from traceql.verdicts.bounds import never_beside, overlap_bound
from traceql.verdicts.intervals import run_bounds
from traceql.verdicts.measured import RunClass


@dataclass
class RunVerdict:
    """One run's what-if, in medians over its steps (the first captured step left out): what overlapping
    communication saves against running it after computation (``overlap_saves_ns``; None without
    communication), what the slowdown cases cost (``contention_ns``, and its share of the step), and what each
    straggler cost in the steps it held (``stragglers``: rank, steps, cost per step)."""

    run_id: str
    steps: int
    step_ns: int | None
    overlap_saves_ns: int | None
    contention_ns: int | None
    contention_pct: float | None
    stragglers: list[dict[str, Any]]
    ranks: int
    clocks_agree: bool = True  # whether its ranks share one clock (else no straggler can be judged)
    lines: list[str] = field(default_factory=list)  # the verdict, a finding a line
    causes: list[dict[str, Any]] = field(default_factory=list)  # largest first (``analyzers.causes``)
    intervals: dict[str, list[int] | None] = field(default_factory=dict)  # ``verdicts.intervals.run_bounds``
    run_class: str | None = None  # what the validation counts it as (``measured.RunClass``)
    # the run without the profiler, where it timed its untraced steps (``analyzers.replay.profiler``): the CPU
    # factor, the median step and what overlap saves there
    untraced: dict[str, Any] | None = None
    # the run's communication beside computation (the median a step, ``step_breakdown.cause_times``): the most
    # overlapping can save; ``overlap_capped`` where the serialized replay's saving (or cost) went beyond it
    overlap_beside_ns: int | None = None
    overlap_capped: bool = False
    overlap_never: bool = False  # no judged step's communication ran beside computation (``bounds.never_beside``)

    @property
    def text(self) -> str:
        return "; ".join(self.lines)

    def to_dict(self) -> dict[str, Any]:
        return {**{k: v for k, v in self.__dict__.items() if k != "lines"}, "verdict": self.text}


def replay_of(ops: pl.DataFrame, waits: pl.DataFrame | None, stragglers: pl.DataFrame | None = None,
              ways: tuple[str, ...] = tuple(replay.WAYS), replay_trace: bool = True,
              comm: replay.CommAlone | None = None, untraced: float | None = None) -> replay.WhatIf:
    """``ops`` (``activities.with_labels``) replayed as they were and without each cause of ``ways`` (``comm``: the
    collectives' speed alone when serialized, default the fitted one), a window of steps at a time where the
    run is long (``replay.windowed``); ``untraced``: the run's untraced median step over its traced one (the
    untraced what-ifs: ``analyzers.replay.profiler``)."""
    named = None if stragglers is None else stragglers.select("run_id", "step", "rank")
    return replay.windowed(on_clock(ops), waits=waits, stragglers=named, ways=ways, replay_trace=replay_trace,
                           comm=comm, untraced=untraced)


def replayed(timeline: Timeline, labelled: DetectResult, stragglers: pl.DataFrame | None = None,
             untraced: float | None = None) -> replay.WhatIf:
    """The run replayed as it was and without each cause (``stragglers``: ``run_id``, ``step``, ``rank``;
    ``untraced``: :func:`replay_of`'s)."""
    ops = with_labels(activities(timeline.kernels, timeline.memops, timeline.ranks), labelled.kernels)
    return replay_of(ops, timeline.waits, stragglers, untraced=untraced)


def verdict(run_id: str, steps: pl.DataFrame, ranks: int, has_comm: bool,
            cls: RunClass | None = None, clocks_agree: bool = True, late: pl.DataFrame | None = None,
            times: pl.DataFrame | None = None) -> RunVerdict:
    """One run's verdict (:class:`RunVerdict`) from its steps: its causes ranked (``analyzers.causes``), then
    what overlap saves; ``cls``: the run's class, whose validated errors make its figures' intervals
    (``verdicts.intervals``; none without); ``clocks_agree``: whether its ranks share one clock (else nothing is
    replayed); ``late``: the launches its GPUs waited for (``labelling.late``), which split the idle cause;
    ``times``: its causes' own time a step (``step_breakdown.cause_times``), which bound what the causes and
    overlapping are said to cost or save (``verdicts.bounds``)."""
    if not clocks_agree:
        out = RunVerdict(run_id, 0, None, None, None, None, [], ranks, False)
        out.lines = ["not replayed: its ranks' clocks disagree (a replay joins the ranks at their collectives): "
                     "no cause is priced"]
        return out
    judged = steps.filter(~pl.col("first"))
    if judged.is_empty():
        judged = steps

    def median(expr: pl.Expr) -> int | None:
        value = judged.select(expr.median()).item() if judged.height else None
        return None if value is None else round(value)

    step_ns = median(pl.col("replayed_ns"))
    saves = median(pl.col("serialized_ns") - pl.col("replayed_ns")) if has_comm else None
    contention = median(pl.col("replayed_ns") - pl.col("without_contention_ns"))
    pct = round(100 * contention / step_ns, 2) if contention is not None and step_ns else None
    held = judged.filter(pl.col("straggler_rank").is_not_null()).with_columns(
        (pl.col("replayed_ns") - pl.col("without_straggler_ns")).alias("cost_ns"))
    stragglers = [{"rank": rank, "steps": part["step"].to_list(),
                   "cost_ns": round(cast(float, part["cost_ns"].median()))}
                  for (rank,), part in held.group_by("straggler_rank", maintain_order=True)]
    out = RunVerdict(run_id, judged.height, step_ns, saves, contention, pct, stragglers, ranks, clocks_agree)
    cls = cls or RunClass("unknown", None, "its class is unknown")
    out.run_class = cls.name
    out.intervals = run_bounds(judged, cls, has_comm) if judged.height else {}
    out.untraced = _untraced(judged, has_comm)
    cases = int(judged["cases"].sum()) if judged.height else 0
    out.causes = ranking(steps, () if has_comm else (run_id,), late, times).to_dicts()
    if times is not None and saves is not None:
        mine = times.filter((pl.col("run_id") == run_id)
                            & pl.col("step").is_in(judged["step"].cast(pl.Int32).implode()))
        out.overlap_saves_ns, out.overlap_beside_ns, out.overlap_capped = overlap_bound(saves, contention, mine)
        out.overlap_never = never_beside(mine)
        if out.overlap_capped or out.overlap_never:  # a bound, or nothing by construction: no interval
            out.intervals["overlap_saves_ns"] = None
    out.lines = _findings(out, cases, cls)
    return out


def _untraced(judged: pl.DataFrame, has_comm: bool) -> dict[str, Any] | None:
    """The run without the profiler (:attr:`RunVerdict.untraced`), None where it was not replayed so."""
    if "untraced_ns" not in judged.columns or judged["untraced_ns"].null_count() == judged.height:
        return None
    saves = judged.select((pl.col("untraced_serialized_ns") - pl.col("untraced_ns")).median()).item()
    return {"cpu_factor": judged["cpu_factor"].drop_nulls()[0],
            "step_ns": round(cast(float, judged["untraced_ns"].median())),
            "overlap_saves_ns": round(saves) if has_comm and saves is not None else None}


def _untraced_line(u: dict[str, Any]) -> str:
    """The verdict's line on the run without the profiler."""
    slower = f"its CPU ran {1 / u['cpu_factor']:.1f}x slower traced" if u["cpu_factor"] > 0 else \
        "no CPU time left at all still leaves the step longer than untraced: the GPU too ran slower traced"
    text = f"without the profiler {_ms(u['step_ns'])} a step ({slower}, by its untraced steps)"
    if u["overlap_saves_ns"] is not None:
        verb = "saves" if u["overlap_saves_ns"] >= 0 else "costs"
        text += f", where overlap {verb} {_ms(abs(u['overlap_saves_ns']))}/step"
    return text


def _ms(ns: int) -> str:
    return f"{ns / 1e6:,.1f} ms"


def _findings(v: RunVerdict, cases: int, cls: RunClass) -> list[str]:
    if v.step_ns is None:
        return [f"no steps to replay (no {step_marker.described()})"]
    parts = []
    e = cls.error("straggler")
    for c in v.causes:
        parts.append(sentence(c, f"±{e:.1%} of a step" if c["cause"] == "straggler" and e is not None else ""))
    if v.overlap_saves_ns is None:
        parts.append("no communication to overlap")
    elif v.overlap_never:
        parts.append("communication never ran beside computation: overlap saves nothing over serial")
    elif v.overlap_capped:
        verb, against = ("saves", "over") if v.overlap_saves_ns >= 0 else ("costs", "against")
        parts.append(f"overlap {verb} at most {_ms(abs(v.overlap_saves_ns))}/step {against} serial: "
                     + ("its communication beside computation" if v.overlap_saves_ns >= 0 else
                        "its contention and its communication beside computation")
                     + " (the serialized replay goes beyond that)")
    else:
        lo, hi = v.intervals.get("overlap_saves_ns") or (None, None)
        if v.overlap_saves_ns >= 0:
            err = f" ({lo / 1e6:+,.1f} to {hi / 1e6:+,.1f} ms)" if lo is not None and hi is not None else ""
            parts.append(f"overlap saves {_ms(v.overlap_saves_ns)}/step over serial{err}")
        else:
            err = f" ({-hi / 1e6:+,.1f} to {-lo / 1e6:+,.1f} ms)" if lo is not None and hi is not None else ""
            parts.append(f"overlap costs {_ms(-v.overlap_saves_ns)}/step against serial{err}")
    if v.untraced is not None and v.untraced["cpu_factor"] < 1:
        parts.append(_untraced_line(v.untraced))
    if not cases:
        parts.append("no slowdown cases")
    if v.ranks < 2:
        parts.append("one rank: no straggler to judge")
    elif not v.stragglers:
        parts.append("no straggler")
    return parts
