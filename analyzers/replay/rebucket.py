"""Another bucket cap: what each step would take had DDP packed the gradients into buckets of another size.

DDP packs the trained parameters' gradients into buckets (``analyzers.buckets.pack``: DDP's own rule, which
reproduces the buckets every run of the ground-truth matrix recorded), and all-reduces each bucket, one after
another on its communication stream, once the bucket's last gradient is ready. In a step of the trace, each of
the run's own buckets was ready when the last computation launched before its all-reduce ended; what comes
after the last all-reduce (the optimizer) waited for it.

The model (:func:`shifts`), per step:

- *readiness*: the gradient bytes before a point of the reduce order were ready at the time interpolated between
  the run's own buckets' ready times, linearly in bytes (the first bucket's bytes at the second's rate);
- *the wire*: an all-reduce of ``b`` bytes takes ``latency + b × ns_per_byte`` alone (``buckets.AllReduceTime``,
  fitted to the run's own all-reduces at their speed alone, ``alone``), and with computation beside it
  ``CommAlone``'s wait and its share of the overlap more;
- a bucket's all-reduce starts once its gradients are ready on every rank and the one before it has ended, as
  long after as the run's own started;
- the step's end moves by as much as the later of the backward's end and the last all-reduce's end moves: the
  shift between the model at the new cap and the same model at the run's own cap (so that the model's own
  error on the run's cap cancels).

What it leaves out: computation slowed by more or less overlapping communication, and the CPU's time to launch
more or fewer all-reduces (it matters on a CPU-bound step).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from traceql.analyzers.buckets import AllReduceTime
from traceql.analyzers.replay.alone import CommAlone, alone_tails, coverage
from traceql.analyzers.replay.graph import RunGraph, build
from traceql.analyzers.replay.scenarios import gradient_allreduces

BACKWARD = 2 / 3  # the backward's share of a step's computation (about twice the forward's work)
SHIFTS = {"run_id": pl.String, "step": pl.Int32, "shift_ns": pl.Int64}


def ready_times(rg: RunGraph) -> pl.DataFrame:
    """The gradient all-reduces of every normal step (``scenarios.gradient_allreduces``) and when each was ready
    on its rank: ``node``, ``run_id``, ``rank``, ``step``, ``k`` (the k-th of its step on its rank, in launch
    order), ``ready`` (the end of the last computation its rank launched before it), ``start``."""
    n = rg.n_ops
    deferred = gradient_allreduces(rg)
    t = rg.measured
    frame = rg.ops.select("node", "run_id", "rank", "step", "kind", "launch_ns").with_columns(
        pl.Series("start", t.start[:n]), pl.Series("end", t.end[:n]), pl.Series("grad", deferred))
    compute = (frame.filter(pl.col("kind") == "compute", pl.col("launch_ns").is_not_null())
               .sort("run_id", "rank", "launch_ns")
               .with_columns(pl.col("end").cum_max().over("run_id", "rank").alias("ready"))
               .select("run_id", "rank", "launch_ns", "ready"))
    grads = frame.filter(pl.col("grad")).sort("run_id", "rank", "launch_ns")
    # the latest compute launched before each all-reduce: an as-of join on the launch time
    grads = grads.join_asof(compute, on="launch_ns", by=["run_id", "rank"], strategy="backward",
                            allow_exact_matches=False, check_sortedness=False)  # both sorted by (by, on) above
    return (grads.filter(pl.col("ready").is_not_null())
            .with_columns(pl.int_range(pl.len()).over("run_id", "rank", "step").alias("k"))
            .select("node", "run_id", "rank", "step", "k", "ready", "start"))


def shifts(rg: RunGraph, old: Sequence[int], new: Sequence[int], comm: CommAlone | None = None,
           contention: pl.DataFrame | None = None) -> pl.DataFrame:
    """Per run and normal step (:data:`SHIFTS`), how much later (below 0: earlier) the step would end had its
    gradients been packed into buckets of ``new`` bytes instead of the run's own ``old`` (each in reduce order;
    module doc). ``contention``: per ``run_id`` and ``step``, what the slowdown cases cost the step
    (``contention_ns``), shared out over the communication that overlapped computation. Steps whose ranks did
    not all reduce ``len(old)`` gradient all-reduces are left out."""
    comm = comm or CommAlone()
    grads = ready_times(rg)
    if grads.is_empty() or not len(old) or not len(new):
        return pl.DataFrame(schema=SHIFTS)
    n = rg.n_ops
    grads = grads.with_columns(pl.Series("alone", alone_tails(rg, comm)[:n][grads["node"].to_numpy()]))
    old_b, new_b = np.asarray(old, np.float64), np.asarray(new, np.float64)
    complete = (grads.group_by("run_id", "rank", "step").agg(pl.len().alias("count"))
                .group_by("run_id", "step").agg((pl.col("count") == len(old)).all().alias("ok")))
    grads = grads.join(complete.filter(pl.col("ok")).select("run_id", "step"), on=["run_id", "step"])
    cost = {} if contention is None else {(r, s): float(c or 0) for r, s, c in
                                          contention.select("run_id", "step", "contention_ns").iter_rows()}
    rows = []
    t = rg.measured
    lanes = rg.ops.select("run_id", "rank", "step", "kind", pl.Series("s", t.start[:n]), pl.Series("e", t.end[:n]))
    for (run,), mine in grads.group_by(["run_id"], maintain_order=True):
        per_k = mine.group_by("k").agg(pl.col("alone").median()).sort("k")
        wire = AllReduceTime.fit(old_b[per_k["k"].to_numpy()], per_k["alone"].to_numpy()) or AllReduceTime(0.0, 0.0)
        delay = float(np.median(np.maximum(mine["start"].to_numpy() - mine["ready"].to_numpy(), 0)))
        compute = lanes.filter(pl.col("run_id") == run, pl.col("kind") == "compute")
        covered = {rank: coverage(c["s"].to_numpy(), c["e"].to_numpy())
                   for (rank,), c in compute.group_by(["rank"])}
        bounds = compute.group_by("rank", "step").agg(pl.col("s").min())
        ends = lanes.filter(pl.col("run_id") == run).group_by("rank", "step").agg(pl.col("e").max())
        for (step,), part in mine.group_by(["step"], maintain_order=True):
            part = part.sort("rank", "k")
            ranks = part["rank"].unique(maintain_order=True).to_list()
            ready = part["ready"].to_numpy().reshape(len(ranks), len(old))
            first = (pl.DataFrame({"rank": ranks}, schema={"rank": pl.Int32})
                     .join(bounds.filter(pl.col("step") == step), on="rank", how="left")["s"].to_numpy())
            moved = _moved(ready, first, old_b, new_b, _Wire(wire, comm, delay, [covered.get(r) for r in ranks]),
                           cost.get((run, step), 0.0))
            end = ends.filter(pl.col("step") == step).join(pl.DataFrame({"rank": ranks, "d": moved}), on="rank")
            shift = float((end["e"] + end["d"]).max() - end["e"].max()) if end.height else 0.0
            rows.append((run, step, round(shift)))
    return pl.DataFrame(rows, schema=SHIFTS, orient="row").sort("run_id", "step")


def bucket_shifts(ops: pl.DataFrame, old: list[int], new: list[int], *, waits: pl.DataFrame | None = None,
                  comm: CommAlone | None = None, contention: pl.DataFrame | None = None) -> pl.DataFrame:
    """Per run and normal step of ``ops`` (as ``run.steps`` takes them), how much later its step would end with
    its gradients in DDP buckets of ``new`` bytes instead of its own ``old`` (:data:`SHIFTS`;
    ``contention``: ``run_id``, ``step``, ``contention_ns``, what contention cost each step)."""
    if ops.is_empty():
        return pl.DataFrame(schema=SHIFTS)
    return shifts(build(ops, waits), old, new, comm, contention)


@dataclass(frozen=True)
class _Wire:
    """What a schedule of all-reduces needs: their time alone, beside computation, their delay after ready."""

    wire: AllReduceTime
    comm: CommAlone
    delay: float
    covered: list  # per rank, f(t): its computation before t (None: none)


def _moved(ready: np.ndarray, first: np.ndarray, old: np.ndarray, new: np.ndarray, how: _Wire,
           contention: float) -> np.ndarray:
    """Per rank, how much later what follows the last all-reduce starts with the ``new`` buckets than with the
    ``old``: the later of the backward's end and the last all-reduce's end, each at the new cap less at the old.
    The computation gains (or loses) the share of ``contention`` that the overlap lost (or gained), spread evenly
    over the step's computation up to the backward's end."""
    backward = ready[:, -1]
    before, overlap = _comm_end(_ready_at(ready, old, old, first), old, how, backward)
    after, beside = _comm_end(_ready_at(ready, old, new, first), new, how, backward)
    gain = contention * (1 - beside / overlap) if overlap > 0 else 0.0
    if gain:
        span = np.maximum(backward - first, 1.0)
        warped = ready - gain * np.clip((ready - first[:, None]) / span[:, None], 0, 1)
        after, _ = _comm_end(_ready_at(warped, old, new, first), new, how, backward)
        backward = backward - gain
    return np.maximum(backward, after) - np.maximum(ready[:, -1], before)


def _ready_at(ready: np.ndarray, old: np.ndarray, new: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Per rank, when each of the ``new`` buckets' gradients were all ready, from when the ``old`` ones' were
    (``first``: each rank's first computation of the step)."""
    have = np.cumsum(old)
    want = np.minimum(np.cumsum(new), have[-1])
    out = np.empty((ready.shape[0], len(new)))
    for r, times in enumerate(ready):
        times = np.maximum.accumulate(times)
        if len(old) > 1:  # the first bucket's first gradient: at the second bucket's rate before its end
            start = times[0] - (times[1] - times[0]) / old[1] * old[0]
        else:  # one bucket shows only the backward's end: the backward, the last BACKWARD of the computation
            start = times[0] - BACKWARD * (times[0] - first[r]) if np.isfinite(first[r]) else times[0]
        out[r] = np.interp(want, np.r_[0.0, have], np.r_[start, times])
    return out


def _comm_end(ready: np.ndarray, size: np.ndarray, how: _Wire, backward: np.ndarray) -> tuple[float, float]:
    """When the last of the buckets' all-reduces ends, and the computation beside them (the mean over ranks):
    each starts ``delay`` after its gradients are ready on every rank, not before the one before it ended, and
    takes its time alone, more where a rank computed beside it (its computation up to its ``backward``'s end:
    what follows waits for the all-reduces)."""
    end, overlap = -np.inf, 0.0
    base = how.wire.alone(size)
    for j in range(len(size)):
        start = max(float(ready[:, j].max()) + how.delay, end)
        tail, beside = base[j], []
        for cov, stop in zip(how.covered, backward, strict=True):
            if cov is not None:
                window = np.minimum(np.array([start, start + base[j]]), stop)
                beside.append(float(cov(window[1:])[0] - cov(window[:1])[0]))
        if beside and max(beside) > 0:
            tail = base[j] + how.comm.wait_ns + how.comm.share * max(beside)
        overlap += float(np.mean(beside)) if beside else 0.0
        end = start + tail
    return end, overlap
