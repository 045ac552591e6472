"""Two more what-ifs on a run's graph (``graph.build``), each a cause's own time taken out, for the ranking of
causes (``traceql.analyzers.causes``):

- :func:`without_communication`: every communication kernel takes no time of its own: a collective ends as its
  last rank arrives (the ranks still wait for each other, so a straggler's delay stays), a kernel outside a
  collective ends as it starts. What the step saves is its exposed communication: the transfers on its
  critical path.
- :func:`without_idle`: every CPU launches its next call as soon as the previous one returned (no CPU time
  between launches, none after a synchronisation, but before a rank's first launch of a step), so that a GPU
  never waits for its host to feed it; in the steps a straggler held, the straggler's own launches keep their
  times (that delay is the straggler's). But on a launch-bound run (its GPUs idle more than
  ``step_breakdown.LAUNCH_BOUND_IDLE`` of a step, the median over its ranks' steps) the rank that held the
  others is most often the one whose CPU ran slower that step: there only the straggler's pauses (a time of
  :data:`PAUSE_NS` or more between two of its calls: a sleep, a stall) keep their length, and its pace (the
  shorter times between its calls) goes as every rank's does.
  What the step saves is its idle: the GPUs waiting for their CPUs.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import polars as pl

from traceql.analyzers.late_launches import reach, step_groups
from traceql.analyzers.replay.engine import Graph
from traceql.analyzers.replay.graph import BLOCKED, CHAIN, RunGraph
from traceql.analyzers.step_breakdown import LAUNCH_BOUND_IDLE

PAUSE_NS = 1_000_000  # a straggler's time between two calls this long or longer is its delay, not its pace


def without_communication(rg: RunGraph) -> Graph:
    """Communication kernels of no duration of their own (module doc)."""
    g = rg.graph
    comm = np.flatnonzero((rg.ops["kind"] == "comm").to_numpy())
    dur, tail = g.dur.copy(), g.tail.copy()
    dur[comm] = 0
    tail[comm] = 0
    return replace(g, dur=dur, tail=tail)


def without_idle(rg: RunGraph, named: pl.DataFrame) -> Graph:
    """No CPU time between launches (module doc); ``named``: each step's straggler (``run_id``, ``step``,
    ``rank``), whose launches in that step keep their lags (on a launch-bound run, its pauses alone)."""
    g = rg.graph
    node = rg.edge_nodes(g)
    cpu = np.isin(rg.edge_kind, (CHAIN, BLOCKED)) & (node >= rg.n_ops)
    calls = rg.ops.select("run_id", "rank", "step")[rg.launch_op]  # the columns first: a gather of three
    # a rank's first launch of a step keeps its lag: the step begins when it began (its time is measured from
    # its first GPU start, which would otherwise move earlier while its end stays)
    first = calls.select(pl.int_range(pl.len()).over("run_id", "rank", "step") == 0).to_series().to_numpy()
    cpu &= ~first[np.clip(node - rg.n_ops, 0, len(first) - 1)]
    if not named.is_empty():  # the straggler's pauses in the steps it held: its delay is not idle
        held = calls.join(named.select("run_id", pl.col("step").cast(pl.Int32), pl.col("rank").cast(pl.Int32),
                                       pl.lit(True).alias("_held")),
                          on=["run_id", "step", "rank"], how="left", maintain_order="left")["_held"]
        held_call = held.fill_null(False).to_numpy()
        paced = calls["run_id"].is_in(list(launch_bound(rg))).to_numpy()  # the straggler's pace is idle there
        at = np.clip(node - rg.n_ops, 0, len(held_call) - 1)
        cpu &= ~(held_call[at] & (~paced[at] | (g.pred_lag >= PAUSE_NS)))
    lag = g.pred_lag.copy()
    lag[cpu] = 0
    return replace(g, pred_lag=lag)


def launch_bound(rg: RunGraph) -> set[str]:
    """The runs of ``rg`` whose GPUs sat idle more than ``LAUNCH_BOUND_IDLE`` of a step: the median over their
    ranks' normal steps of the time no activity ran, within the step's span, over that span."""
    ops = rg.ops.select("run_id", "rank", "step", "step_kind", "start_ns", "end_ns").filter(
        pl.col("step_kind") == "sync")
    if ops.is_empty():
        return set()
    key = ["run_id", "rank", "step"]
    order, free = reach(step_groups(ops), ops["start_ns"].to_numpy(), ops["end_ns"].to_numpy())
    ops = ops[order].with_columns(pl.Series("_free", free))
    busy = (pl.col("end_ns") - pl.max_horizontal("start_ns", "_free")).clip(0)
    steps = ops.group_by(key).agg(busy.sum().alias("busy"),
                                  (pl.col("end_ns").max() - pl.col("start_ns").min()).alias("span"))
    share = steps.filter(pl.col("span") > 0).group_by("run_id").agg(
        (1 - pl.col("busy") / pl.col("span")).median().alias("idle"))
    return set(share.filter(pl.col("idle") > LAUNCH_BOUND_IDLE)["run_id"].to_list())
