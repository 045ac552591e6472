"""Another bucket cap: what each step would take had DDP packed the gradients into buckets of another size.

DDP packs the trained parameters' gradients into buckets, in the reverse of the order the model registered them,
a bucket closing once it holds the cap (:func:`pack`; DDP's own rule, which reproduces the buckets every run of
the ground-truth matrix recorded), and all-reduces each bucket, one after another on its communication stream,
once the bucket's last gradient is ready. In a step of the trace, each of the run's own buckets was ready when
the last computation launched before its all-reduce ended; what comes after the last all-reduce (the optimizer)
waited for it.

The model (:func:`shifts`), per step:

- *readiness*: the gradient bytes before a point of the reduce order were ready at the time interpolated between
  the run's own buckets' ready times, linearly in bytes (the first bucket's bytes at the second's rate);
- *the wire*: an all-reduce of ``b`` bytes takes ``latency + b × ns_per_byte`` alone (:class:`Wire`, fitted to the
  run's own all-reduces at their speed alone, ``alone``), and with computation beside it ``CommAlone``'s wait
  and its share of the overlap more;
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

from traceql.analyzers.replay.alone import CommAlone, alone_tails, coverage, overlapped
from traceql.analyzers.replay.graph import RunGraph
from traceql.analyzers.replay.scenarios import gradient_allreduces

MB = 1 << 20
SHIFTS = {"run_id": pl.String, "step": pl.Int32, "shift_ns": pl.Int64}


def pack(param_bytes: Sequence[int], cap_mb: float) -> list[int]:
    """DDP's buckets at ``cap_mb``: the gradients (``param_bytes``, in registration order) taken in reverse, a
    bucket closed once it holds ``cap_mb`` MiB; each bucket's bytes, in the order they are reduced."""
    cap, out, held = cap_mb * MB, [], 0
    for size in reversed(param_bytes):
        held += int(size)
        if held >= cap:
            out.append(held)
            held = 0
    return [*out, held] if held else out


@dataclass(frozen=True)
class Wire:
    """An all-reduce's time alone: ``latency_ns + bytes × ns_per_byte``."""

    latency_ns: float
    ns_per_byte: float

    def alone(self, size: np.ndarray) -> np.ndarray:
        return self.latency_ns + size * self.ns_per_byte


def fit_wire(size: np.ndarray, alone_ns: np.ndarray) -> Wire:
    """The least-squares :class:`Wire` through (bytes, time alone) pairs, neither term below 0 (a term the free
    fit puts below 0 held at 0, the other fitted alone)."""
    x, y = np.asarray(size, np.float64), np.asarray(alone_ns, np.float64)
    if len(np.unique(x)) >= 2:
        slope, intercept = np.polyfit(x, y, 1)
        if intercept >= 0 and slope >= 0:
            return Wire(float(intercept), float(slope))
    through_zero = float((x @ y) / (x @ x)) if (x @ x) > 0 else 0.0
    if through_zero > 0:
        return Wire(0.0, through_zero)
    return Wire(float(max(np.median(y), 0.0)) if len(y) else 0.0, 0.0)


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


def shifts(rg: RunGraph, old: Sequence[int], new: Sequence[int], comm: CommAlone | None = None) -> pl.DataFrame:
    """Per run and normal step (:data:`SHIFTS`), how much later (below 0: earlier) the step would end had its
    gradients been packed into buckets of ``new`` bytes instead of the run's own ``old`` (each in reduce order;
    module doc). Steps whose ranks did not all reduce ``len(old)`` gradient all-reduces are left out."""
    comm = comm or CommAlone()
    grads = ready_times(rg)
    if grads.is_empty() or not len(old) or not len(new):
        return pl.DataFrame(schema=SHIFTS)
    n = rg.n_ops
    alone = alone_tails(rg, comm)[:n]
    ov = overlapped(rg)
    grads = grads.with_columns(pl.Series("alone", alone[grads["node"].to_numpy()]),
                               pl.Series("ov", ov[grads["node"].to_numpy()]))
    old_b, new_b = np.asarray(old, np.float64), np.asarray(new, np.float64)
    complete = (grads.group_by("run_id", "rank", "step").agg(pl.len().alias("count"))
                .group_by("run_id", "step").agg((pl.col("count") == len(old)).all().alias("ok")))
    grads = grads.join(complete.filter(pl.col("ok")).select("run_id", "step"), on=["run_id", "step"])
    rows = []
    t = rg.measured
    lanes = rg.ops.select("run_id", "rank", "step", "kind", pl.Series("s", t.start[:n]), pl.Series("e", t.end[:n]))
    for (run,), mine in grads.group_by(["run_id"], maintain_order=True):
        per_k = mine.group_by("k").agg(pl.col("alone").median()).sort("k")
        wire = fit_wire(old_b[per_k["k"].to_numpy()], per_k["alone"].to_numpy())
        delay = float(np.median(np.maximum(mine["start"].to_numpy() - mine["ready"].to_numpy(), 0)))
        covered = {}
        for (rank,), c in lanes.filter(pl.col("run_id") == run, pl.col("kind") == "compute").group_by(["rank"]):
            covered[rank] = coverage(c["s"].to_numpy(), c["e"].to_numpy())
        ends = (lanes.filter(pl.col("run_id") == run).group_by("rank", "step")
                .agg(pl.col("e").max()))
        for (step,), s in mine.group_by(["step"], maintain_order=True):
            s = s.sort("rank", "k")
            ranks = s["rank"].unique(maintain_order=True).to_list()
            ready = s["ready"].to_numpy().reshape(len(ranks), len(old))
            cov = [covered.get(r) for r in ranks]
            before = _comm_end(_ready_at(ready, old_b, old_b), old_b, wire, comm, delay, cov)
            after = _comm_end(_ready_at(ready, old_b, new_b), new_b, wire, comm, delay, cov)
            backward = ready[:, -1]
            moved = np.maximum(backward, after) - np.maximum(backward, before)
            end = ends.filter(pl.col("step") == step).join(pl.DataFrame({"rank": ranks, "d": moved}), on="rank")
            shift = float((end["e"] + end["d"]).max() - end["e"].max()) if end.height else 0.0
            rows.append((run, step, round(shift)))
    return pl.DataFrame(rows, schema=SHIFTS, orient="row").sort("run_id", "step")


def _ready_at(ready: np.ndarray, old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Per rank, when each of the ``new`` buckets' gradients were all ready, from when the ``old`` ones' were."""
    have = np.cumsum(old)
    want = np.minimum(np.cumsum(new), have[-1])
    out = np.empty((ready.shape[0], len(new)))
    for r, times in enumerate(ready):
        times = np.maximum.accumulate(times)
        rate = (times[1] - times[0]) / old[1] if len(old) > 1 else 0.0
        first = times[0] - rate * old[0]  # when the first bucket's first gradient was ready
        out[r] = np.interp(want, np.r_[0.0, have], np.r_[first, times])
    return out


def _comm_end(ready: np.ndarray, size: np.ndarray, wire: Wire, comm: CommAlone, delay: float, covered: list) -> float:
    """When the last of the buckets' all-reduces ends: each starts ``delay`` after its gradients are ready on
    every rank, not before the one before it ended, and takes its time alone, more where a rank computed beside
    it."""
    end = -np.inf
    base = wire.alone(size)
    for j in range(len(size)):
        start = max(float(ready[:, j].max()) + delay, end)
        tail = base[j]
        for cov in covered:
            if cov is None:
                continue
            beside = float(cov(np.array([start + base[j]]))[0] - cov(np.array([start]))[0])
            if beside > 0:
                tail = max(tail, base[j] + comm.wait_ns + comm.share * beside)
        end = start + tail
    return end
