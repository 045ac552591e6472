"""A long run replayed a window of steps at a time, so that what one replay holds is bounded by a window, not
by the run (a run of 32 ranks holds twelve million activities: its whole graph would not fit where its labels do).

Each activity belongs to a step's *bucket*: its step, or, between steps, the step of the activity before it on
its rank (in start order; before its rank's first step, the first bucket). A window holds the buckets of a few
consecutive normal steps of one run (about :data:`WINDOW` activities) and the bucket before them, which stands
for what came before the window: it is replayed but not reported (every step is replayed on its own in the whole
run's replay too, its predecessors outside it at their measured or replayed ends, which the bucket before
gives). Every normal step is reported by one window; the run's first captured step keeps its mark.

What a window changes: the statistics the straggler what-if takes over a rank's other normal steps (its usual
lags and durations) are taken over the window's steps, and a recorded wait or a blocked CPU that reaches back
past the bucket before is not seen. The edges of a bucket before are counted twice in the graph's counts.

Activities stored a file a rank (``stored.Stored``, `detect` of a run of rank files) are sorted by bucket, so
that a window reads a slice of each file, not the whole run.

Windows are replayed two at a time on threads of this process where it may use two cores (:data:`AT_ONCE`) and
none holds more than :data:`PAIRED` times :data:`WINDOW`: the compiled passes and polars let go of Python's lock,
so two windows take about 0.7 times as long as one after the other (the 32-rank run's replay: 0.6 times), and
what the replay holds is two windows, still not the run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import polars as pl

from traceql.analyzers.machine import threads
from traceql.analyzers.replay import sampling
from traceql.analyzers.replay.run import WhatIf, steps_modes
from traceql.analyzers.replay.stored import BEFORE_ALL, BUCKET, Frame, Stored, with_buckets
from traceql.analyzers.threaded import in_order

WINDOW = 250_000  # activities replayed at once (a replay holds about 1 KB an activity at its peak) ...
MIN_STEPS = 8  # ... but no fewer normal steps than this a window (the straggler what-if's statistics)


@dataclass(frozen=True)
class Window:
    """The steps ``first`` .. ``last`` of run ``run_id`` (reported), the buckets from ``since`` held (``since`` <
    ``first``: the one before, replayed as the window's start); ``opens``/``closes``: whether it is the run's
    first or last window (it holds what came before or after the normal steps too); ``held``: the activities of
    its normal steps."""

    run_id: str
    since: int
    first: int
    last: int
    opens: bool
    closes: bool
    held: int = 0

    @property
    def bounds(self) -> tuple[int, int]:
        """The buckets it holds, both ends included."""
        return (BEFORE_ALL if self.opens else self.since), (2**31 - 1 if self.closes else self.last)

    def holds(self) -> pl.Expr:
        """Which activities (with their bucket) the window holds."""
        lo, hi = self.bounds
        return (pl.col("run_id") == self.run_id) & pl.col(BUCKET).is_between(lo, hi)

    def before(self) -> pl.Expr:
        """Which of the activities it holds stand for what came before it: another window reports them."""
        return pl.lit(False) if self.opens else pl.col(BUCKET) == self.since


def plan(ops: pl.LazyFrame, size: int | None = None, min_steps: int | None = None) -> list[Window]:
    """The windows of ``ops`` (activities, ``graph.OP_COLUMNS``): per run, as few as hold about ``size``
    activities of normal steps each (default :data:`WINDOW`), but ``min_steps`` steps at least (default
    :data:`MIN_STEPS`), cut where the activity is even."""
    return _cut(_per_step(ops), size, min_steps)


def _per_step(ops: pl.LazyFrame) -> pl.DataFrame:
    """Each normal step of ``ops`` (``run_id``, ``step``, sorted) and its activities (``n``): what a plan is cut
    from (one scan of a run's stored files for every plan of a replay)."""
    return (ops.filter(pl.col("step_kind") == "sync").group_by("run_id", "step").agg(pl.len().alias("n"))
            .sort("run_id", "step").collect())


def _cut(per: pl.DataFrame, size: int | None, min_steps: int | None) -> list[Window]:
    """:func:`plan` of the steps ``per`` (:func:`_per_step`)."""
    size = WINDOW if size is None else size
    min_steps = MIN_STEPS if min_steps is None else min_steps
    out = []
    for (run_id,), counts in per.group_by("run_id", maintain_order=True):
        number = counts["step"].to_list()
        reach = counts["n"].cum_sum().to_numpy()
        k = max(1, min(-(-int(reach[-1]) // size), len(number) // max(min_steps, 1)))
        cuts = [0, *sorted({int(reach.searchsorted(reach[-1] * j / k)) + 1 for j in range(1, k)}), len(number)]
        for lo, hi in zip(cuts, cuts[1:], strict=False):
            if hi > lo:
                out.append(Window(str(run_id), number[max(lo - 1, 0)], number[lo], number[hi - 1], lo == 0,
                                  hi == len(number), int(reach[hi - 1] - (reach[lo - 1] if lo else 0))))
    return out


@dataclass(frozen=True)
class Windowed:
    """What each window's replay is asked (``replay.steps``' options), where its activities come from (with
    their buckets), what is done to each window's activities once read (``prepare``: say, put them on their
    run's clock), where they come without them, their cases (``cases``: :func:`with_cases`), and the options of
    other replays of the same windows from the same graphs (``also``)."""

    ops: pl.LazyFrame | Stored
    options: dict[str, Any]
    cases: pl.DataFrame | None = None
    prepare: Callable[[pl.DataFrame], pl.DataFrame] | None = None
    also: tuple[dict[str, Any], ...] = ()  # other ways to replay the same windows (``run.steps_modes``)

    def read(self, w: Window) -> pl.DataFrame:
        ops = self.ops.window(w) if isinstance(self.ops, Stored) else self.ops.filter(w.holds()).collect()
        return with_cases(self.prepare(ops) if self.prepare else ops, self.cases)


def with_cases(ops: Frame, cases: pl.DataFrame | None) -> Frame:
    """``ops`` (lazy, they stay lazy) with their ``_case`` and ``_base`` from ``cases`` (the slowdown cases: the
    activities' key columns, ``_case`` and ``_base``), where given."""
    if cases is None:
        return ops
    key = [c for c in cases.columns if c not in ("_case", "_base")]
    if isinstance(ops, pl.DataFrame) and "start_ns" in key and ops.height:  # a window: its span's cases alone
        lo, hi = ops["start_ns"].min(), ops["start_ns"].max()
        cases = cases.filter(pl.col("start_ns").is_between(lo, hi) | pl.col("start_ns").is_null())
    joined = ops.join(cases.lazy() if isinstance(ops, pl.LazyFrame) else cases,
                      on=key, how="left", nulls_equal=True)
    return joined.with_columns(pl.col("_case").fill_null(False))


def window_steps(window: Window, job: Windowed) -> list[tuple[pl.DataFrame, tuple[int, ...]]]:
    """One window replayed (``replay.steps`` on its activities) as ``job`` asks and as each of its ``also``: its
    reported steps and its graph's counts, each way."""
    ops = job.read(window)
    waits, modes = _split([job.options, *job.also])
    for mode in modes:
        if mode.get("stragglers") is not None:
            mode["stragglers"] = mode["stragglers"].filter(pl.col("run_id") == window.run_id,
                                                           pl.col("step").is_between(window.first, window.last))
    if waits is not None:
        waits = waits.filter(pl.col("run_id") == window.run_id)
    got = steps_modes(ops, waits=waits, cases=ops["_case"] if "_case" in ops.columns else None,
                      baseline=ops["_base"] if "_base" in ops.columns else None, modes=modes)
    own = ops.height - int(ops.select(window.before().sum()).item())
    return [(one.steps.filter(pl.col("step").is_between(window.first, window.last)),
             (one.recorded, one.inferred, one.unexplained, one.forced, own, one.disordered)) for one in got]


def _split(asked: list[dict[str, Any]]) -> tuple[pl.DataFrame | None, list[dict[str, Any]]]:
    """The waits of ways ``asked`` (the activities': the first's, the same every way) and each way's other
    options (copies)."""
    return asked[0].get("waits"), [{k: v for k, v in a.items() if k != "waits"} for a in asked]


Mapper = Callable[[Callable[[Window, Windowed], Any], list[Window], Windowed], Iterable[Any]]


AT_ONCE = 2  # windows replayed at once on threads, where the process may use as many cores ...
PAIRED = 1.25  # ... where none holds more than this times WINDOW (a window cut by its steps holds a step over)


def _threaded(fn: Callable[[Window, Windowed], Any], items: list[Window], job: Windowed) -> Iterator[Any]:
    """``fn(window, job)`` for each window in order, :data:`AT_ONCE` at a time on threads (``threaded``; one after
    another where this process may use one core, ``machine.threads``, or a window holds more than
    :data:`PAIRED` times :data:`WINDOW` activities: cut by its steps, not its size, two would hold far more than
    one plan's worth)."""
    small = all(w.held <= WINDOW * PAIRED for w in items)
    return in_order(fn, items, job, min(AT_ONCE, threads()) if small else 1, "traceql-window")


def by_window(cut: list[Window], job: Windowed, mapper: Mapper | None = None,
              weights: list[tuple[int, float]] | None = None) -> list[tuple[pl.DataFrame, list[int]]]:
    """Every window of ``cut`` replayed as ``job`` says (its options: ``replay.steps``' keyword arguments but the
    cases and baselines, which are the activities' ``_case`` and ``_base``; and each of its ``also``), two at a
    time on threads here where the windows allow it (module doc), else one after another, or through ``mapper``
    (``mapper(fn, windows, job)`` yields ``fn(window, job)`` for each, in order); each way, the steps and the
    summed counts (``replay.WhatIf``'s). With ``weights`` (per window of ``cut``: its index in the run's plan
    and its steps' weight, ``sampling``), the steps carry them."""
    ways = 1 + len(job.also)
    frames: list[list[pl.DataFrame]] = [[] for _ in range(ways)]
    counts = [[0] * 6 for _ in range(ways)]
    for i, got in enumerate((mapper or _threaded)(window_steps, cut, job)):
        for way, (frame, count) in enumerate(got):
            if weights is not None:
                frame = frame.with_columns(pl.lit(weights[i][0], pl.Int32).alias(sampling.WINDOW),
                                           pl.lit(weights[i][1], pl.Float64).alias(sampling.WEIGHT))
            frames[way].append(frame)
            counts[way] = [a + b for a, b in zip(counts[way], count, strict=True)]
    return [(_firsts(pl.concat(f)), c) for f, c in zip(frames, counts, strict=True)]


def _firsts(steps: pl.DataFrame) -> pl.DataFrame:
    """The steps of every window, each run's first marked, sorted."""
    first = steps.group_by("run_id").agg(pl.col("step").min().alias("_first"))
    steps = steps.join(first, on="run_id", how="left").with_columns((pl.col("step") == pl.col("_first"))
                                                                    .alias("first")).drop("_first")
    return steps.sort("run_id", "step")


def windowed(ops: pl.DataFrame | Stored, *, size: int | None = None, min_steps: int | None = None,
             mapper: Mapper | None = None, cases: pl.DataFrame | None = None,
             prepare: Callable[[pl.DataFrame], pl.DataFrame] | None = None, sample: tuple[int, int] | None = None,
             **options: Any) -> WhatIf:
    """``run.steps`` of ``ops`` (activities in a frame, or stored a file a rank: :class:`Stored`; with their
    ``_case`` and ``_base``, where they have them, else from ``cases``: :func:`with_cases`), a window of about
    ``size`` activities at a time where they hold more (a replay's memory bounded by a window; ``mapper`` may
    replay the windows elsewhere, in order; ``prepare`` is done to each window's activities once read);
    ``options``: ``run.steps``' other arguments. With ``sample`` (``(above, sampled)``), a run of more than
    ``above`` normal steps is replayed in part (``sampling.choose``: its stragglers' windows and a sample of the
    others, about ``sampled`` steps, each step with its weight)."""
    got = windowed_modes(ops, [{**options, "sample": sample}], size=size, min_steps=min_steps, mapper=mapper,
                         cases=cases, prepare=prepare)[0]
    assert got is not None  # the first way is always replayed
    return got


def windowed_modes(ops: pl.DataFrame | Stored, modes: list[dict[str, Any]], *, size: int | None = None,
                   min_steps: int | None = None, mapper: Mapper | None = None, cases: pl.DataFrame | None = None,
                   prepare: Callable[[pl.DataFrame], pl.DataFrame] | None = None) -> list[WhatIf | None]:
    """:func:`windowed` of ``ops`` asked several ways (``modes``: each its ``sample`` and other options; their
    ``waits`` the first's), each window read once and each what-if's graph made once where the ways share it
    (``run.steps_modes``); each as :func:`windowed` gives it alone. A way whose windows are not the first's (a
    sample of steps where the first replays all, or another sample) is not replayed: None."""
    lazy = ops.scan() if isinstance(ops, Stored) else ops.lazy()
    per = _per_step(lazy)
    plans = [_plan(per, size, min_steps, mode.get("sample"), mode.get("stragglers")) for mode in modes]
    cut, weights = plans[0]
    same = [i for i, plan in enumerate(plans) if plan == plans[0]]
    asked = [{k: v for k, v in modes[i].items() if k != "sample"} for i in same]
    out: list[WhatIf | None] = [None] * len(modes)
    if len(cut) <= 1 and weights is None:  # one replay of them all
        frame = ops if isinstance(ops, pl.DataFrame) else ops.scan().collect()
        frame = with_cases(prepare(frame) if prepare else frame, cases)
        waits, modes = _split(asked)
        got = steps_modes(frame, waits=waits, cases=frame["_case"] if "_case" in frame.columns else None,
                          baseline=frame["_base"] if "_base" in frame.columns else None, modes=modes)
        for i, one in zip(same, got, strict=True):
            out[i] = one
        return out
    job = Windowed(with_buckets(ops).lazy() if isinstance(ops, pl.DataFrame) else ops, asked[0], cases, prepare,
                   tuple(asked[1:]))
    for i, (frame, counts) in zip(same, by_window(cut, job, mapper, weights), strict=True):
        recorded, inferred, unexplained, forced, activities, disordered = counts
        out[i] = WhatIf(frame, recorded, inferred, unexplained, forced, activities, disordered)
    return out


def _plan(per: pl.DataFrame, size: int | None, min_steps: int | None, sample: tuple[int, int] | None,
          named: pl.DataFrame | None) -> tuple[list[Window], list[tuple[int, float]] | None]:
    """The windows a replay of the steps ``per`` is cut into and, where it is a sample (``sample``: ``(above,
    sampled)``, :func:`windowed`; ``named``: the stragglers, whose windows are all replayed), their weights."""
    cut = _cut(per, size, min_steps)
    if sample is None or _normal_steps(per) <= sample[0]:
        return cut, None
    small = _cut(per, 1, min_steps)  # windows of a few steps each, a sample of them
    weights = _sample(per, small, named, sample)
    return ([small[i] for i, _ in weights], weights) if weights is not None else (cut, None)


def _sample(per: pl.DataFrame, cut: list[Window], named: pl.DataFrame | None,
            sample: tuple[int, int]) -> list[tuple[int, float]] | None:
    """The windows of ``cut`` (of the steps ``per``: :func:`_per_step`) to replay and their steps' weights
    (``sampling.choose``); None where every one is."""
    steps = {str(run): part["step"].to_numpy()  # sorted (_per_step), each run in its order
             for (run,), part in per.group_by("run_id", maintain_order=True)}
    counts = {}
    for w in cut:
        mine = steps[w.run_id]
        counts[(w.run_id, w.first)] = max(int(mine.searchsorted(w.last, "right") - mine.searchsorted(w.first)), 1)
    held = set() if named is None else {(str(r), int(s)) for r, s in named.select("run_id", "step").iter_rows()}
    chosen = sampling.choose(cut, counts, held, *sample)
    replayed = sum(counts[(cut[i].run_id, cut[i].first)] for i in chosen)
    if replayed > sampling.WORTH * sum(counts.values()):  # stragglers in most windows: the whole run, as planned
        return None
    return sorted(chosen.items())


def _normal_steps(per: pl.DataFrame) -> int:
    """The most normal steps a run has (``per``: :func:`_per_step`)."""
    return int(per.group_by("run_id").len().select(pl.col("len").max()).item() or 0) if per.height else 0
