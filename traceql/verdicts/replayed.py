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

    @property
    def text(self) -> str:
        return "; ".join(self.lines)

    def to_dict(self) -> dict[str, Any]:
        return {**{k: v for k, v in self.__dict__.items() if k != "lines"}, "verdict": self.text}


def replay_of(ops: pl.DataFrame, waits: pl.DataFrame | None, stragglers: pl.DataFrame | None = None,
              ways: tuple[str, ...] = tuple(replay.WAYS), replay_trace: bool = True,
              comm: replay.CommAlone | None = None) -> replay.WhatIf:
    """``ops`` (``activities.with_labels``) replayed as they were and without each cause of ``ways`` (``comm``: the
    collectives' speed alone when serialized, default the fitted one), a window of steps at a time where the
    run is long (``replay.windowed``)."""
    named = None if stragglers is None else stragglers.select("run_id", "step", "rank")
    return replay.windowed(on_clock(ops), waits=waits, stragglers=named, ways=ways, replay_trace=replay_trace,
                           comm=comm)


def replayed(timeline: Timeline, labelled: DetectResult, stragglers: pl.DataFrame | None = None) -> replay.WhatIf:
    """The run replayed as it was and without each cause (``stragglers``: ``run_id``, ``step``, ``rank``)."""
    ops = with_labels(activities(timeline.kernels, timeline.memops, timeline.ranks), labelled.kernels)
    return replay_of(ops, timeline.waits, stragglers)


def verdict(run_id: str, steps: pl.DataFrame, ranks: int, has_comm: bool,
            errors: dict[str, str] | None = None, clocks_agree: bool = True) -> RunVerdict:
    """One run's verdict (:class:`RunVerdict`) from its steps: its causes ranked (``analyzers.causes``), then
    what overlap saves; ``errors``: what the overlap and straggler lines say of their error on the validation
    runs (``measured.errors``); ``clocks_agree``: whether its ranks share one clock (else nothing is replayed)."""
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
    cases = int(judged["cases"].sum()) if judged.height else 0
    out.causes = ranking(steps, () if has_comm else (run_id,)).to_dicts()
    out.lines = _findings(out, cases, errors or {})
    return out


def _ms(ns: int) -> str:
    return f"{ns / 1e6:,.1f} ms"


def _findings(v: RunVerdict, cases: int, errors: dict[str, str]) -> list[str]:
    if v.step_ns is None:
        return ["no steps to replay (no NVTX step_<i> or ProfilerStep#<i> ranges)"]
    parts = []
    for c in v.causes:
        parts.append(sentence(c, errors.get("straggler", "") if c["cause"] == "straggler" else ""))
    if v.overlap_saves_ns is None:
        parts.append("no communication to overlap")
    else:
        err = f" ({errors['overlap']})" if "overlap" in errors else ""
        if v.overlap_saves_ns >= 0:
            parts.append(f"overlap saves {_ms(v.overlap_saves_ns)}/step over serial{err}")
        else:
            parts.append(f"overlap costs {_ms(-v.overlap_saves_ns)}/step against serial{err}")
    if not cases:
        parts.append("no slowdown cases")
    if v.ranks < 2:
        parts.append("one rank: no straggler to judge")
    elif not v.stragglers:
        parts.append("no straggler")
    return parts
