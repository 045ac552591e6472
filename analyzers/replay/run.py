"""What-if: a replay of a run from its trace, and what each step would have taken without each cause.

:func:`steps` replays the run's graph (``graph``: what each GPU activity and CPU launch waited for) with the
trace's own durations, then with each what-if (``scenarios``), and gives one row per step of each run: its
time as measured (the first GPU start of the step on any rank to its last GPU end on any rank, on the run's
common clock) and as replayed, without the slowdown cases, without its straggler, and with communication
serialized after computation, without communication's own time and without the GPUs' idle (``removed``).
Each what-if is replayed a step at a time, what came before the step as it was:
a step's figure is what that step alone would have taken (a step without a case or a straggler is its replay).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, cast

import numpy as np
import polars as pl

from traceql.analyzers.replay import removed, scenarios
from traceql.analyzers.replay.alone import CommAlone
from traceql.analyzers.replay.engine import Graph, Replayed, replay
from traceql.analyzers.replay.graph import RunGraph, build
from traceql.analyzers.replay.profiler import calibrated
from traceql.analyzers.replay.without_straggler import without_stragglers
from traceql.analyzers.stragglers import MIN_COST_SHARE

STEPS = {"run_id": pl.String, "step": pl.Int32, "first": pl.Boolean, "measured_ns": pl.Int64,
         "replayed_ns": pl.Int64, "without_straggler_ns": pl.Int64, "without_contention_ns": pl.Int64,
         "serialized_ns": pl.Int64, "bucket_cap_ns": pl.Int64, "straggler_rank": pl.Int32, "cases": pl.Int64,
         "without_communication_ns": pl.Int64, "without_idle_ns": pl.Int64, "untraced_ns": pl.Int64,
         "untraced_serialized_ns": pl.Int64, "cpu_factor": pl.Float64, "without_comm_cpu_ns": pl.Int64}
# what-ifs whose step is measured from the step's replayed start: they only take time out, and a step's first
# activity may start sooner without idle (a later launch's) while its end is held (a straggler's step)
ENDS_ONLY = ("without_communication_ns", "without_idle_ns", "without_comm_cpu_ns")
# what-ifs that reorder a step: measured from the step's start as replayed (``untraced_ns``'s for the untraced
# one), or their own where earlier: an activity that opened the step and now runs later (a copy of the next batch
# a side thread launched) does not make the step begin later, and so shorter
REORDERED = {"serialized_ns": "replayed_ns", "untraced_serialized_ns": "untraced_ns"}
WAYS = {"replayed_ns": "replayed", "without_straggler_ns": "without straggler",
        "without_contention_ns": "without contention", "serialized_ns": "serialized",
        "without_communication_ns": "without communication", "without_idle_ns": "without idle",
        "untraced_ns": "untraced", "untraced_serialized_ns": "untraced, serialized",
        "without_comm_cpu_ns": "without communication's CPU work"}


@dataclass
class WhatIf:
    """Per step (:data:`STEPS`), and how the graph was made: edges recorded in the trace, inferred, activities
    nothing explained, nodes a cycle had to release, activities that began well before their stream's previous
    one ended (a trace whose stream order is impossible)."""

    steps: pl.DataFrame
    recorded: int
    inferred: int
    unexplained: int
    forced: int
    activities: int
    disordered: int = 0


def steps(ops: pl.DataFrame, *, waits: pl.DataFrame | None = None, cases: pl.Series | None = None,
          baseline: pl.Series | None = None, stragglers: pl.DataFrame | None = None,
          ways: tuple[str, ...] = tuple(WAYS), replay_trace: bool = True, comm: CommAlone | None = None,
          untraced: float | None = None) -> WhatIf:
    """One row per normal step of each run of ``ops`` (activities: ``graph.OP_COLUMNS``, on each run's common
    clock; ``cases``/``baseline``, aligned with ``ops``: whether each is a slowdown case and its baseline in
    ns); ``stragglers``: ``run_id``, ``step``, ``rank`` of each step's straggler. ``ways``: the what-ifs to
    replay (of :data:`WAYS`; the others' columns are null). Without ``replay_trace``, the steps as replayed
    are taken as measured (what the replay of the trace's own durations gives: ``graph``; tests hold it).
    ``comm``: the collectives' speed alone in the serialized what-if (default: fitted on the ground-truth
    matrix, ``alone``). ``untraced``: the run's untraced median step over its traced one, where it timed both:
    the steps replayed with the CPU's time calibrated to it (``profiler``), as they are (``untraced_ns``) and
    serialized (``untraced_serialized_ns``), and the factor (``cpu_factor``); null without."""
    mode = {"stragglers": stragglers, "ways": ways, "replay_trace": replay_trace, "comm": comm, "untraced": untraced}
    return steps_modes(ops, waits=waits, cases=cases, baseline=baseline, modes=[mode])[0]


def steps_modes(ops: pl.DataFrame, *, waits: pl.DataFrame | None = None, cases: pl.Series | None = None,
                baseline: pl.Series | None = None, modes: Sequence[Mapping[str, Any]] = ({},)) -> list[WhatIf]:
    """:func:`steps` of ``ops`` asked several ways at once (``modes``: each :func:`steps`' other keyword
    arguments), from one graph: each what-if's graph is made once for the modes it is the same for (the same
    stragglers named; without idle, the same stragglers costly in their replay). Each is what :func:`steps`
    gives alone."""
    if ops.is_empty():  # no GPU activity (a run on CPU): no step to replay
        return [WhatIf(pl.DataFrame(schema=STEPS), 0, 0, 0, 0, 0) for _ in modes]
    ops = ops.with_columns(
        (cases if cases is not None else pl.lit(False)).alias("_case"),
        (baseline if baseline is not None else pl.lit(None, pl.Float64)).alias("_base"))
    rg = build(ops, waits)
    shared = _Shared(rg, rg.ops["_case"].fill_null(False).to_numpy(),
                     rg.ops["_base"].cast(pl.Float64).fill_null(np.nan).to_numpy(), _parts(rg))
    out = []
    for i, mode in enumerate(modes):
        shared.begin([set(later.get("ways", WAYS)) for later in modes[i + 1:]])
        out.append(_mode(shared, **mode))
    return out


@dataclass
class _Shared:
    """What the modes of :func:`steps_modes` share: the graph, its cases and baselines, its nodes' steps and the
    what-ifs' graphs made so far (by name and what they were made for). One rule lets a graph go: it is held
    while a later mode asks for its name (``wanted``), so it goes at its last use (:meth:`graph`) or, where no
    later use finds it (other stragglers named), as the mode after its last maker begins (:meth:`begin`): a
    window's graphs all held at once are most of its memory."""

    rg: RunGraph
    is_case: np.ndarray
    base: np.ndarray
    part: np.ndarray
    wanted: set[str] = field(default_factory=set)
    graphs: list[tuple[str, object, tuple[Graph, np.ndarray | None]]] = field(default_factory=list)

    def begin(self, later: list[set[str]]) -> None:
        """A mode begins, the modes after it asking for the what-ifs ``later``: the graphs this mode may use
        (found by name and what they were made for) are held, and after it only what ``later`` asks for."""
        self.graphs = [held for held in self.graphs if held[0] in self.wanted]
        self.wanted = set().union(*later)

    def graph(self, name: str, of: object,
              make: Callable[[], tuple[Graph, np.ndarray | None]]) -> tuple[Graph, np.ndarray | None]:
        """The what-if ``name``'s graph (and the steps it changes), made once for what it depends on beside the
        graph (``of``: stragglers, equal frames; the collectives' speed, the same object; None: nothing)."""
        for i, (known, dep, got) in enumerate(self.graphs):
            same = dep.equals(of) if isinstance(dep, pl.DataFrame) and isinstance(of, pl.DataFrame) else dep is of
            if known == name and same:
                if name not in self.wanted:  # its last use
                    del self.graphs[i]
                return got
        got = make()
        if name in self.wanted:
            self.graphs.append((name, of, got))
        return got


def _mode(sh: _Shared, stragglers: pl.DataFrame | None = None, ways: tuple[str, ...] = tuple(WAYS),
          replay_trace: bool = True, comm: CommAlone | None = None, untraced: float | None = None) -> WhatIf:
    """:func:`steps` of the graph ``sh`` asked one way."""
    rg, is_case, base, part = sh.rg, sh.is_case, sh.base, sh.part
    named = stragglers if stragglers is not None else pl.DataFrame(schema={"run_id": pl.String, "step": pl.Int32,
                                                                           "rank": pl.Int32})
    # each what-if, and the steps it changes (the others are as replayed); the stragglers a graph depends on
    make: dict[str, tuple[object, Callable[[], tuple[Graph, np.ndarray | None]]]] = {
        "without_straggler_ns": (named, lambda: (without_stragglers(rg, named), _steps_of(rg, part, named))),
        "without_contention_ns": (None, lambda: (scenarios.without_contention(rg, is_case, base),
                                                 np.unique(part[:rg.n_ops][is_case]))),
        "serialized_ns": (comm, lambda: (scenarios.serialized(rg, is_case, base, comm), None)),
        "without_communication_ns": (None, lambda: (removed.without_communication(rg), None)),
        "without_comm_cpu_ns": (None, lambda: (scenarios.without_comm_cpu(rg), None)),
    }
    whole = replay(rg.graph, part, rg.measured) if replay_trace else rg.measured
    done = {"replayed_ns": whole}
    for name in ways:
        if name == "without_idle_ns":  # its graph depends on the replay: which stragglers cost their steps
            costly = _costly(rg, named, done, is_case)
            graph, _ = sh.graph(name, costly, partial(_without_idle, rg, costly))
            done[name] = replay(graph, part, whole)
        elif name in make:
            graph, changed = sh.graph(name, *make[name])
            done[name] = replay(graph, part, whole, only=changed)
    factor = None
    if untraced is not None and {"untraced_ns", "untraced_serialized_ns"} & set(ways) and (part >= 0).any():
        cal = calibrated(rg, part, whole, untraced, lambda r: _median_step(rg, r, is_case))
        factor = cal.factor
        done["untraced_ns"] = cal.replayed
        if "untraced_serialized_ns" in ways:
            done["untraced_serialized_ns"] = replay(
                scenarios.serialized(replace(rg, graph=cal.graph), is_case, base, comm), part, cal.replayed)
    frame = _spans(rg, done, is_case).with_columns(pl.lit(None, pl.Int64).alias(k) for k in WAYS if k not in done)
    frame = frame.with_columns(pl.lit(factor, pl.Float64).alias("cpu_factor"))
    frame = frame.with_columns(pl.lit(None, pl.Int64).alias("bucket_cap_ns"))
    frame = frame.join(named.select("run_id", pl.col("step").cast(pl.Int32), pl.col("rank").alias("straggler_rank")),
                       on=["run_id", "step"], how="left")
    return WhatIf(frame.select(list(STEPS)).cast(cast("Mapping[Any, type[pl.DataType]]", STEPS))
                  .sort("run_id", "step"),
                  rg.recorded, rg.inferred, rg.unexplained, sum(r.forced for r in done.values()), rg.n_ops,
                  rg.disordered)


def _without_idle(rg: RunGraph, costly: pl.DataFrame) -> tuple[Graph, None]:
    """The graph without idle (``removed.without_idle``, ``costly``: the stragglers that cost their steps), which
    changes every step."""
    return removed.without_idle(rg, costly), None


def _costly(rg: RunGraph, named: pl.DataFrame, done: dict[str, Replayed], is_case: np.ndarray) -> pl.DataFrame:
    """The stragglers of ``named`` whose replay without them shows they cost their step at least
    ``stragglers.MIN_COST_SHARE`` of it (all of them where that was not replayed): a rank that held the others
    a little in a launch-bound run is its CPU's pace, which is the run's idle, not a straggler's own delay."""
    if named.is_empty() or "without_straggler_ns" not in done:
        return named
    spans = _spans(rg, {k: done[k] for k in ("replayed_ns", "without_straggler_ns")}, is_case)
    costly = spans.filter(pl.col("replayed_ns") - pl.col("without_straggler_ns")
                          >= MIN_COST_SHARE * pl.col("replayed_ns")).select("run_id", pl.col("step").cast(pl.Int32))
    return named.with_columns(pl.col("step").cast(pl.Int32)).join(costly, on=["run_id", "step"], how="semi")


def _median_step(rg: RunGraph, done: Replayed, is_case: np.ndarray) -> float:
    """The median of a replay's normal steps, the first captured one left out."""
    spans = _spans(rg, {"x": done}, is_case)
    judged = spans.filter(~pl.col("first"))
    return float(cast(float, (judged if judged.height else spans)["x"].median()))


def _steps_of(rg: RunGraph, part: np.ndarray, named: pl.DataFrame) -> np.ndarray:
    """The parts (:func:`_parts`) of the steps ``named``: where they had a straggler."""
    held = named.select("run_id", pl.col("step").cast(pl.Int32)).to_struct().implode()
    keys = rg.ops.select((pl.struct("run_id", "step").is_in(held) & (pl.col("step_kind") == "sync"))
                         .fill_null(False)).to_series().to_numpy()
    return np.unique(part[:rg.n_ops][keys])


def _parts(rg: RunGraph) -> np.ndarray:
    """Per node, its normal step (a number a run's step), -1 for none: a what-if is replayed a step at a time,
    the rest of the run as it was, so that each step's figure is that step's alone."""
    step = rg.ops.select(pl.when(pl.col("step_kind") == "sync").then(pl.struct("run_id", "step").rank("dense"))
                         .fill_null(0).cast(pl.Int64) - 1).to_series().to_numpy()
    return np.r_[step, step[rg.launch_op]]


def _start(k: str, done: dict[str, Replayed]) -> pl.Expr:
    """Where a what-if's step begins (:data:`ENDS_ONLY`, :data:`REORDERED`)."""
    if k in ENDS_ONLY:
        return pl.col("s_replayed_ns").min()
    if k in REORDERED and REORDERED[k] in done:
        return pl.min_horizontal(pl.col(f"s_{k}").min(), pl.col(f"s_{REORDERED[k]}").min())
    return pl.col(f"s_{k}").min()


def _spans(rg: RunGraph, done: dict[str, Replayed], is_case: np.ndarray) -> pl.DataFrame:
    n = rg.n_ops
    cols: dict[str, pl.Series | np.ndarray] = {"start_ns": rg.ops["start_ns"], "end_ns": rg.ops["end_ns"],
            **{f"s_{k}": r.start[:n] for k, r in done.items()}, **{f"e_{k}": r.end[:n] for k, r in done.items()}}
    frame = rg.ops.select("run_id", "rank", "step", "step_kind").with_columns(**cols, case=is_case)
    sync = frame.filter(pl.col("step_kind") == "sync")
    first = frame.filter(pl.col("step").is_not_null()).group_by("run_id").agg(pl.col("step").min().alias("_first"))
    return (sync.group_by("run_id", "step")
            .agg((pl.col("end_ns").max() - pl.col("start_ns").min()).alias("measured_ns"),
                 *((pl.col(f"e_{k}").max() - _start(k, done)).alias(k) for k in done),
                 pl.col("case").sum().alias("cases"))
            .join(first, on="run_id", how="left")
            .with_columns((pl.col("step") == pl.col("_first")).alias("first")))
