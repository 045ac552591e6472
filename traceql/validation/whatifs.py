"""The what-if's answers against the runs of the counterfactual that the matrix measured.

- *serialized*: ``whatif``'s ``serialized_ns`` of the stock run against the serialized run's measured step,
  less the gaps the collection's hook left between its all-reduces (:func:`hook_gaps`);
  the overlap saving it predicts (serialized − replayed) against the real one (serial − stock, measured). The
  collectives' speed alone (``analyzers.replay.alone``) is fitted on other runs' pairs (``comm_tails``).
- *without the straggler*: in the steps a rank was made late (a CPU sleep or a GPU spin), ``without_straggler_ns``
  against the run's other steps (what the step takes with nobody late).
- *shortened delay*: the GPU-delay run replayed with the injected spin kernel shortened by its length, against
  the run's other steps.

Every step time is the trace's (the replay's ``measured_ns``, GPU activity of the step on the run's clock), the
first captured step left out, medians over the steps.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import numpy as np
import polars as pl

from traceql.analyzers.replay.alone import CommAlone
from traceql.analyzers.untraced import Untraced
from traceql.validation.matrix import MatrixRun, Pooled, Predicted

if TYPE_CHECKING:
    from polars._typing import ColumnNameOrSelector, PolarsDataType

SPIN = "spin_kernel"  # the GPU delay's kernel (torch.cuda._sleep)
BACK_TO_BACK_NS = 3_000  # one all-reduce starting this soon after the one before it ended: back to back


def replayed_steps(run: MatrixRun) -> pl.DataFrame:
    """``whatif``'s steps of the run (``analyzers.replay.STEPS``), the first captured step left out."""
    from traceql.commands.whatif import whatif

    return whatif(run.path()).steps.filter(~pl.col("first")).sort("step")


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def series_median(values: pl.Series) -> float:
    """The median of a column of step times (polars types it as any value: here a number)."""
    return float(cast(float, values.median()))


@dataclass(frozen=True)
class Serialized(Predicted):
    """One configuration's serialized what-if against its serialized runs (ns, medians over steps and runs)."""

    stock_ns: float
    predicted_ns: float
    measured_ns: float  # less the hook's gaps (:func:`hook_gaps`)
    hook_ns: float = 0.0  # the gaps taken out

    def before(self) -> tuple[float, float]:
        """The stock step, both ways: what overlapping saves is the serialized step less it."""
        return self.stock_ns, self.stock_ns


def serialized_steps(run: MatrixRun, comm: CommAlone | None = None) -> pl.DataFrame:
    """``whatif``'s steps of the run with only the serialized what-if, the collectives alone as ``comm`` says,
    the first captured step left out."""
    from traceql.analyzers.replay.activities import activities, with_labels
    from traceql.labelling.request import request
    from traceql.verdicts.replayed import replay_of

    req = request(run.path())
    timeline, labelled = req.label(req.runs()[0], req.read_baseline())
    ops = with_labels(activities(timeline.kernels, timeline.memops, timeline.ranks), labelled.kernels)
    found = untraced_of(run)
    done = replay_of(ops, timeline.waits, ways=("serialized_ns", "untraced_ns", "untraced_serialized_ns"),
                     comm=comm, untraced=found.untraced_ms / found.traced_ms if found else None)
    return done.steps.filter(~pl.col("first")).sort("step")


def untraced_of(run: MatrixRun) -> Untraced | None:
    """The run's traced and untraced median steps, as its ranks timed them (``analyzers.untraced``)."""
    from traceql.labelling.inputs import run_untraced

    found = run_untraced([run.folder])
    return found[1] if found else None


def comm_tails(run: MatrixRun) -> pl.DataFrame:
    """Every collective member's tail and its overlap with computation (``analyzers.replay.alone.tails``)."""
    from traceql.analyzers.replay.activities import activities, on_clock
    from traceql.analyzers.replay.alone import tails
    from traceql.analyzers.replay.graph import build
    from traceql.labelling.inputs import read_timeline

    timeline = read_timeline(run.path())
    return tails(build(on_clock(activities(timeline.kernels, timeline.memops, timeline.ranks)), timeline.waits))


def hook_gaps(run: MatrixRun) -> pl.DataFrame:
    """Per step of a serialized run (``step``, ``gap_ns``): how long its gradient all-reduces sat apart beyond
    back to back (:data:`BACK_TO_BACK_NS`), the median over ranks. The first hook (``h100-a``, ``h100-b``) copied
    each bucket's sums into the gradients between one all-reduce and the next, 50 µs a bucket at the end of
    every step, which DDP does not do; the second (``h100-c``) leaves them 2.5 µs apart."""
    from traceql.labelling.inputs import read_timeline

    kernels = read_timeline(run.path()).kernels
    reduces = kernels.filter(pl.col("kind") == "comm", pl.col("step_kind") == "sync",
                             pl.col("collective").cast(pl.String).str.starts_with("AllReduce")).sort("start_ns")
    apart = reduces.with_columns((pl.col("start_ns") - pl.col("end_ns").shift(1).over("rank", "step")).alias("gap"))
    return (apart.group_by("rank", "step").agg((pl.col("gap") - BACK_TO_BACK_NS).clip(0).sum().alias("gap_ns"))
            .group_by("step").agg(pl.col("gap_ns").median()).with_columns(pl.col("step").cast(pl.Int32)))


MEASURED = {"step": pl.Int32, "measured_ns": pl.Int64, "gap_ns": pl.Int64}


def measured_steps(run: MatrixRun) -> pl.DataFrame:
    """Per step of the run (:data:`MEASURED`), the first captured step left out: its time as its trace measures
    it (``measured_ns``, as ``whatif`` does) and, for a serialized run, its hook's gaps (:func:`hook_gaps`; 0
    for the others). A light repeat's are those its traces gave when it was collected (``steps.json``)."""
    from traceql.analyzers import replay
    from traceql.analyzers.replay.activities import activities, on_clock
    from traceql.labelling.inputs import read_timeline

    if run.light:
        return pl.DataFrame(run.shipped_steps(), schema=MEASURED).sort("step")
    timeline = read_timeline(run.path())
    ops = on_clock(activities(timeline.kernels, timeline.memops, timeline.ranks))
    steps = replay.steps(ops, waits=timeline.waits, ways=(), replay_trace=False).steps.filter(~pl.col("first"))
    steps = steps.select(pl.col("step").cast(pl.Int32), "measured_ns")
    gaps = hook_gaps(run) if run.role == "serial" else pl.DataFrame(schema={"step": pl.Int32, "gap_ns": pl.Int64})
    return (steps.join(gaps, on="step", how="left").with_columns(pl.col("gap_ns").fill_null(0))
            .cast(cast("Mapping[ColumnNameOrSelector | PolarsDataType, PolarsDataType]", MEASURED)).sort("step"))


def _serial_ns(runs: list[MatrixRun]) -> tuple[float, float]:
    """Serialized runs' measured step less the hook's gaps, and the gaps (the median of each run's median)."""
    steps = [measured_steps(r) for r in runs]
    return (median([series_median(s["measured_ns"] - s["gap_ns"]) for s in steps]),
            median([series_median(s["gap_ns"]) for s in steps]))


def serialized(stock: list[MatrixRun], serial: list[MatrixRun], comm: CommAlone | None = None) -> Serialized:
    """The stock runs' predicted serialized step (the collectives alone as ``comm`` says) against the serial
    runs' measured one less the hook's gaps (:func:`hook_gaps`; several runs of a noisy configuration: the
    median of each run's median)."""
    s = [serialized_steps(r, comm) for r in stock]
    return Serialized(median([series_median(x["measured_ns"]) for x in s]),
                      median([series_median(x["serialized_ns"]) for x in s]), *_serial_ns(serial))


@dataclass(frozen=True)
class PooledSerialized(Serialized):
    """A configuration over every host of its GPU kind: the what-if on each traced stock run (the median of
    their predicted steps, and of their predicted savings) against every stock and serialized run measured."""

    saving_ns: float = 0.0  # the median over traced stock runs of (predicted serialized - that run's step)
    real_interval_ns: tuple[float, float] = (float("nan"), float("nan"))  # :func:`saving_interval`
    idle: float | None = None  # the share of a step the traced stock runs' GPUs sat idle (:func:`idle_of`)
    # without the profiler (ms, wall clock; None where the runs did not time untraced steps): the stock runs'
    # untraced step, the what-if's untraced serialized step (each traced stock run's untraced step times its
    # replay's untraced serialized over untraced step), the serialized runs' untraced step (medians over runs)
    untraced_stock_ms: float | None = None
    untraced_predicted_ms: float | None = None
    untraced_measured_ms: float | None = None

    @property
    def change_predicted_ns(self) -> float:
        return self.saving_ns


RESAMPLES = 4000


def saving_interval(stock_ns: list[float], serial_ns: list[float]) -> tuple[float, float]:
    """The 95 % interval of the real overlap saving (serialized runs' median less the stock runs'), each run's
    median step drawn again with replacement within its side (a bootstrap, seeded: the same every time). With
    two or three runs a side it is rough, and says how far the runs themselves let a saving be known."""
    rng = np.random.default_rng(0)
    a, b = np.asarray(stock_ns), np.asarray(serial_ns)
    diff = (np.median(rng.choice(b, (RESAMPLES, len(b))), axis=1)
            - np.median(rng.choice(a, (RESAMPLES, len(a))), axis=1))
    return float(np.percentile(diff, 2.5)), float(np.percentile(diff, 97.5))


def pooled(p: Pooled, comm: CommAlone | None = None) -> PooledSerialized:
    """The serialized what-if of ``p``'s traced stock runs against all its runs (:class:`PooledSerialized`)."""
    s = [serialized_steps(r, comm) for r in p.traced]
    stock = [series_median(measured_steps(r)["measured_ns"]) for r in p.stock]
    serial_steps = [measured_steps(r) for r in p.serial]
    serial = [series_median(x["measured_ns"] - x["gap_ns"]) for x in serial_steps]
    gaps = median([series_median(x["gap_ns"]) for x in serial_steps])
    saving = median([series_median(x["serialized_ns"] - x["measured_ns"]) for x in s])
    idles = [i for i in (idle_of(r) for r in p.traced) if i is not None]
    return PooledSerialized(median(stock), median([series_median(x["serialized_ns"]) for x in s]), median(serial),
                            gaps, saving_ns=saving, real_interval_ns=saving_interval(stock, serial),
                            idle=median(idles) if idles else None, **_untraced(p, s))


def _untraced(p: Pooled, replayed: list[pl.DataFrame]) -> dict[str, float | None]:
    """:class:`PooledSerialized`'s untraced figures (None where a side timed no untraced steps)."""
    def ms(runs: list[MatrixRun]) -> list[float]:
        return [u.untraced_ms for u in map(untraced_of, runs) if u is not None]

    predicted = []
    for run, steps in zip(p.traced, replayed, strict=True):
        u = untraced_of(run)
        if u is not None and steps["untraced_ns"].null_count() < steps.height:
            predicted.append(u.untraced_ms * series_median(steps["untraced_serialized_ns"])
                             / series_median(steps["untraced_ns"]))
    stock, serial = ms(p.stock), ms(p.serial)
    if not (stock and serial and predicted):
        return {}
    return {"untraced_stock_ms": median(stock), "untraced_predicted_ms": median(predicted),
            "untraced_measured_ms": median(serial)}


def idle_of(run: MatrixRun) -> float | None:
    """The median share of a step the run's GPUs sat idle, as ``whatif`` classes a run
    (``analyzers.step_breakdown.idle_share``)."""
    from traceql.analyzers.step_breakdown import idle_share, step_breakdown
    from traceql.labelling.inputs import read_timeline

    timeline = read_timeline(run.path())
    return idle_share(step_breakdown(timeline.kernels, timeline.memops, timeline.steps))


@dataclass(frozen=True)
class Injected:
    """A run made late on one rank at chosen steps: what the what-if says those steps take without it."""

    name: str
    rank: int
    steps: list[int]
    delayed_ns: float  # measured, in the injected steps
    normal_ns: float  # measured, in the other steps
    predicted_ns: float  # the what-if's answer for the injected steps
    named: bool  # the straggler the what-if named in those steps is the injected rank

    @property
    def error(self) -> float:
        return (self.predicted_ns - self.normal_ns) / self.normal_ns

    @property
    def recovered(self) -> float:
        """The share of the injected delay the what-if removes (1: all of it)."""
        extra = self.delayed_ns - self.normal_ns
        return (self.delayed_ns - self.predicted_ns) / extra if extra else float("nan")


def without_straggler(run: MatrixRun) -> Injected:
    """The run's ``without_straggler_ns`` in its injected steps against its other steps."""
    inj = run.injected() or {}
    steps = replayed_steps(run)
    hit = steps.filter(pl.col("step").is_in(inj.get("steps", [])))
    rest = steps.filter(~pl.col("step").is_in(inj.get("steps", [])))
    named = hit.height > 0 and (hit["straggler_rank"] == inj.get("rank")).fill_null(False).all()
    return Injected(run.name, int(inj.get("rank", -1)), list(inj.get("steps", [])), series_median(hit["measured_ns"]),
                    series_median(rest["measured_ns"]), series_median(hit["without_straggler_ns"]), bool(named))


def shortened_delay(run: MatrixRun) -> Injected:
    """The GPU-delay run replayed with each injected spin kernel shortened by the injected length (the
    replay's "without contention" way, the spin kernels as the cases and their length less the delay as their
    baseline), in the injected steps, against the run's other steps."""
    from traceql.analyzers import replay
    from traceql.analyzers.replay.activities import KEY, activities, on_clock
    from traceql.labelling.inputs import read_timeline

    inj = run.injected() or {}
    timeline = read_timeline(run.path())
    spins = timeline.kernels.filter(pl.col("name").cast(pl.String).str.contains(SPIN),
                                    pl.col("rank") == inj.get("rank"),
                                    pl.col("step").is_in(inj.get("steps", []))).select(
        *KEY, pl.lit(True).alias("_case"),
        (pl.col("end_ns") - pl.col("start_ns") - inj.get("ms", 0) * 1e6).clip(lower_bound=0).alias("_base"))
    ops = activities(timeline.kernels, timeline.memops, timeline.ranks).join(
        spins, on=KEY, how="left", nulls_equal=True).with_columns(pl.col("_case").fill_null(False))
    ops = on_clock(ops)
    steps = replay.steps(ops, waits=timeline.waits, cases=ops["_case"], baseline=ops["_base"],
                         ways=("without_contention_ns",)).steps.filter(~pl.col("first"))
    hit = steps.filter(pl.col("step").is_in(inj.get("steps", [])))
    rest = steps.filter(~pl.col("step").is_in(inj.get("steps", [])))
    return Injected(run.name, int(inj.get("rank", -1)), list(inj.get("steps", [])), series_median(hit["measured_ns"]),
                    series_median(rest["measured_ns"]), series_median(hit["without_contention_ns"]),
                    int(ops["_case"].sum()) == len(inj.get("steps", [])))
