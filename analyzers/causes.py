"""Causes ranked by what they cost a step: one ranking per run, from its replay (``traceql.analyzers.replay``).

Each cause's cost is what the run's normal steps (the first captured step left out) would be shorter without
it, replayed, as a mean over those steps (a straggler that held two steps of four costs half of its cost in each
of them a step) and as a share of the mean replayed step:

- ``straggler`` (one row per rank named): the step without that rank's delays (``without_straggler_ns``); the
  slowdowns of the ranks that waited for it (their collectives spun beside their computation) are its cost, not
  contention's;
- ``contention``: every slowdown case at its baseline (``without_contention_ns``);
- ``exposed communication``: the collectives' own time gone, the ranks still waiting for each other
  (``without_communication_ns``);
- ``idle``: the GPUs never waiting for their CPUs' launches (``without_idle_ns``);
- ``communication's CPU work``: the gradients' all-reduces costing their launching thread no more than any
  launch (DDP's hook, the collective's events and stream waits gone: ``without_comm_cpu_ns``), named where it
  costs at least :data:`CPU_WORK_SHARE` of a step (a launch-bound backward).

Each is priced on its own, so the costs overlap and do not add up to the step. Beside the idle cause's cost
(on the critical path) stands the time a GPU waited for its launches, measured, a step (``waited_ns``), and the
CPU sections that issued the launches it waited for (``analyzers.late_launches``: ``sections``, the largest
:data:`SECTIONS_SHOWN`), where the trace names any: a rank whose CPU held the others (a straggler) keeps its
idle in the cost, not in the time waited.

Beside the idle and exposed-communication causes' costs stands their own time a step (``time_ns``, from the
step breakdown where the caller made it: ``step_breakdown.cause_times``), and the sentence says where the
idle cost goes beyond it (sooner launches also hide communication) or frees little of a long idle.

:func:`held_cases` tells which slowdown cases ran while their rank waited for a straggler: those are the
straggler's.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, cast

import polars as pl

from traceql.analyzers.late_launches import by_section
from traceql.analyzers.replay.sampling import WEIGHT, errors

CAUSES: dict[str, pl.DataType | type[pl.DataType]] = {
    "run_id": pl.String, "cause": pl.String, "rank": pl.Int32, "cost_ns": pl.Int64, "share": pl.Float64,
    "steps": pl.List(pl.Int32), "step_cost_ns": pl.Int64, "time_ns": pl.Int64, "error_ns": pl.Int64,
    "waited_ns": pl.Int64, "sections": pl.List(pl.Struct({"section": pl.String, "wait_ns": pl.Int64,
                                                          "share": pl.Float64}))}
# each cause, the what-if that takes it out (``replay.STEPS``)
WITHOUT = {"contention": "without_contention_ns", "exposed communication": "without_communication_ns",
           "idle": "without_idle_ns", "communication's CPU work": "without_comm_cpu_ns"}
CPU_WORK_SHARE = 0.01  # communication's CPU work is named where it costs this share of the mean step or more
SECTIONS_SHOWN = 3  # the idle cause's sections named, largest first ...
NAMED_SHARE = 0.5  # ... where ranges hold at least this share of the time waited
# the cause's own time a step in the step breakdown (``step_breakdown.cause_times``), where it has one
TIME_OF = {"idle": "idle_ns", "exposed communication": "exposed_ns"}
FREED_SHARE = 0.1  # an idle cost under this share of the idle time: launching sooner frees little of it
SLACK_NS = 50_000  # a cost within this of its time is that time (both rounded to 0.1 ms when shown)
HELD = {"run_id": pl.String, "straggler": pl.Int32, "cases": pl.Int64, "lost_ns": pl.Int64}


def ranking(steps: pl.DataFrame, silent: Collection[str] = (), late: pl.DataFrame | None = None,
            times: pl.DataFrame | None = None) -> pl.DataFrame:
    """Per run of ``steps`` (``replay.STEPS``), its causes largest first (:data:`CAUSES`: ``cost_ns`` a normal
    step, ``share`` of the mean replayed step in %, ``steps`` where it cost anything, ``step_cost_ns`` the
    median cost in those steps; for the idle cause, ``waited_ns`` and ``sections``: the time a GPU waited
    for launches and the CPU sections that issued them, from ``late``, ``analyzers.late_launches.LATE``).
    Contention only where the run has slowdown cases, exposed communication only where it has communication
    (``silent``: the runs without). ``times``: per step the causes' own time (``step_breakdown.cause_times``):
    the idle and exposed communication rows' ``time_ns``, a mean over the same steps as their cost."""
    judged = steps.filter(~pl.col("first") & pl.col("replayed_ns").is_not_null())
    waited = by_section(late, judged) if late is not None else None
    rows: list[dict[str, Any]] = []
    for (run_id,), part in judged.group_by("run_id", maintain_order=True):
        if WEIGHT not in part.columns:  # every step replayed
            part = part.with_columns(pl.lit(1.0).alias(WEIGHT))
        n = float(part[WEIGHT].sum())
        mean = float((part["replayed_ns"] * part[WEIGHT]).sum()) / n
        held = part.filter(pl.col("straggler_rank").is_not_null())
        for (rank,), mine in held.group_by("straggler_rank", maintain_order=True):
            cost = (mine["replayed_ns"] - mine["without_straggler_ns"]).clip(0)
            rows.append(_row(run_id, "straggler", rank, cost, mine, n, mean))  # its steps all replayed
        for cause, column in WITHOUT.items():
            if part[column].is_null().all() or (cause == "contention" and not part["cases"].sum()) or (
                    cause == "exposed communication" and run_id in silent):
                continue
            cost = (part["replayed_ns"] - part[column]).clip(0).fill_null(0)
            if cause == "communication's CPU work" and float((cost * part[WEIGHT]).sum()) / n < CPU_WORK_SHARE * mean:
                continue
            rows.append(_row(run_id, cause, None, cost, part, n, mean))
            error = errors(part, cost)
            rows[-1]["error_ns"] = None if error is None else round(error)
            if cause in TIME_OF and times is not None:
                rows[-1]["time_ns"] = _time(times, run_id, part, TIME_OF[cause])
            if cause == "idle" and waited is not None:
                rows[-1].update(_waited(waited.filter(pl.col("run_id") == run_id)))
    out = pl.DataFrame(rows, schema=CAUSES)
    return out.sort("run_id", "cost_ns", descending=[False, True], maintain_order=True)


def _time(times: pl.DataFrame, run_id: str, part: pl.DataFrame, column: str) -> int | None:
    """The mean over the steps of ``part`` (weighted: ``replay.sampling``) of a run's ``column`` of ``times``
    (``step_breakdown.cause_times``)."""
    mine = times.filter(pl.col("run_id") == run_id).join(
        part.select(pl.col("step").cast(pl.Int32), WEIGHT), on="step")
    if not mine.height or not part.height:
        return None
    return round(float((mine[column].fill_null(0) * mine[WEIGHT]).sum()) / float(part[WEIGHT].sum()))


def _waited(waited: pl.DataFrame) -> dict[str, Any]:
    """A run's time waited for launches a step (``waited_ns``) and its largest :data:`SECTIONS_SHOWN` sections
    (``late_launches.SECTIONS``, of that run), the sections None where ranges hold less than
    :data:`NAMED_SHARE` of the time (a trace whose only ranges are a library's: NCCL's, CUB's)."""
    total = int(waited["wait_ns"].sum())
    if waited.filter(pl.col("section").is_not_null())["share"].sum() < NAMED_SHARE:
        return {"waited_ns": total, "sections": None}
    top = waited.head(SECTIONS_SHOWN).select("section", "wait_ns", "share")
    return {"waited_ns": total, "sections": top.to_dicts()}


def _row(run_id: str, cause: str, rank: int | None, cost: pl.Series, part: pl.DataFrame, n: float,
         mean: float) -> dict[str, Any]:
    """One cause's row: ``cost`` in each step of ``part`` (weighted), over the run's ``n`` steps."""
    hit = cost > 0
    per_step = float((cost * part[WEIGHT]).sum()) / n
    return {"run_id": run_id, "cause": cause, "rank": rank, "cost_ns": round(per_step),
            "share": round(100 * per_step / mean, 2) if mean else None, "steps": part["step"].filter(hit).to_list(),
            "step_cost_ns": round(float(cost.filter(hit).median())) if hit.any() else 0, "time_ns": None,
            "error_ns": None, "waited_ns": None, "sections": None}


def label(row: dict[str, Any]) -> str:
    """A cause as a verdict names it: ``the straggler rank 3``, ``contention`` ..."""
    return f"the straggler rank {row['rank']}" if row["cause"] == "straggler" else str(row["cause"])


def sentence(row: dict[str, Any], error: str = "") -> str:
    """One cause's verdict: ``the straggler rank 3 costs 14.3 ms/step (15.2 %; 28.7 ms in steps 2, 4)``;
    ``error``: what such a figure was off by on the validation runs, said in the parentheses; a cost priced
    from a sample of the run's steps (``replay.sampling``) says its sampling error there."""
    where = f"; {error}" if error else ""
    if row.get("error_ns") is not None:
        error_ms = row["error_ns"] / 1e6
        where += f"; ±{error_ms:,.{1 if error_ms >= 0.1 else 2}f} ms sampling error"
    if row["cause"] == "straggler":
        steps = row["steps"]
        where = f"; {row['step_cost_ns'] / 1e6:,.1f} ms in {step_list(steps)}{where}"
    cost, time = row["cost_ns"], row.get("time_ns")
    idle = row["cause"] == "idle" and time is not None
    time = int(time or 0)
    if idle and cost > time + SLACK_NS:  # the GPU's queue fed sooner, communication launched late hides too
        where += f"; {time / 1e6:,.1f} ms idle a step: sooner launches would also hide communication"
    freed_little = idle and time >= 10 * SLACK_NS and cost < FREED_SHARE * time
    if freed_little:
        where += (f"; {time / 1e6:,.1f} ms idle a step, little of it freed by launching sooner: the GPUs waited "
                  "for what the trace does not show")
    text = f"{label(row)} costs {cost / 1e6:,.1f} ms/step ({row['share'] or 0:.1f} %{where})"
    if row.get("sections") and not freed_little:
        text += (f"; a GPU waited {row['waited_ns'] / 1e6:,.1f} ms a step for launches, from " + ", ".join(
            f"{s['section'] if s['section'] is not None else 'outside any range'} {s['wait_ns'] / 1e6:,.1f}"
            for s in row["sections"]) + " ms")
    return text


def step_list(steps: list[int], most: int = 8) -> str:
    """``steps 2, 4`` or, of more than ``most``, the first few and the last with their count: ``295 steps:
    7, 13, 19, 25, 31, 37, ..., 1771``."""
    if len(steps) == 1:
        return f"step {steps[0]}"
    if len(steps) <= most:
        return f"steps {', '.join(map(str, steps))}"
    return f"{len(steps):,} steps: {', '.join(map(str, steps[:most - 2]))}, ..., {steps[-1]}"


def held_phrase(held: pl.DataFrame, lead: str = ", of which ") -> str:
    """What the stragglers' own slowdown cases were (:data:`HELD`), after ``lead`` (to follow a total of the
    time lost), or nothing where they had none."""
    parts = [f"{r['lost_ns'] / 1e6:,.1f} ms by {r['cases']:,} cases while the others waited for the straggler rank "
             f"{r['straggler']}" for r in held.iter_rows(named=True) if r["cases"]]
    return f"{lead}{'; '.join(parts)}: its cost, not contention's" if parts else ""


def held_cases(cases: pl.DataFrame, arrivals: pl.DataFrame, named: pl.DataFrame) -> pl.DataFrame:
    """Per run and straggler (:data:`HELD`): the slowdown cases that ran, on a rank that waited for it, while
    that rank waited at a collective the straggler arrived at last, and the time they lost. ``cases``:
    ``run_id``, ``rank``, ``step``, ``start_ns``, ``end_ns`` (on the run's common clock), ``lost_ns``;
    ``arrivals``: ``analyzers.stragglers.arrivals``; ``named``: the stragglers (``run_id``, ``step``, ``rank``)."""
    if named.is_empty() or cases.is_empty():
        return pl.DataFrame(schema=HELD)
    key = ["run_id", "step", "collective", "index"]
    last = arrivals.filter(pl.col("last")).select(*key, pl.col("rank").alias("straggler"))
    windows = (arrivals.join(last, on=key)
               .join(named.select("run_id", pl.col("step").cast(pl.Int32), pl.col("rank").cast(pl.Int32)
                                  .alias("straggler")), on=["run_id", "step", "straggler"])
               .filter(pl.col("rank") != pl.col("straggler"), pl.col("wait_ns") > 0)
               .select("run_id", "step", "rank", "straggler", pl.col("arrival_ns").alias("w0"),
                       (pl.col("arrival_ns") + pl.col("wait_ns")).alias("w1")))
    hit = (cases.with_row_index("_case").join(windows, on=["run_id", "step", "rank"])
           .filter(pl.col("start_ns") < pl.col("w1"), pl.col("end_ns") > pl.col("w0"))
           .unique("_case", keep="first"))
    return schema_of(hit.group_by("run_id", "straggler").agg(pl.len().cast(pl.Int64).alias("cases"),
                                                             pl.col("lost_ns").sum().cast(pl.Int64)))


def schema_of(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` as :data:`HELD` has it, sorted."""
    return frame.select(list(HELD)).cast(cast("Mapping[Any, type[pl.DataType]]", HELD)).sort("run_id", "straggler")
