"""The dependency graph of a run, built from its trace: what each GPU activity and each CPU launch waited for.

Nodes: every GPU activity (kernels and memory operations; ``ops``), then every CPU launch call that launched
one. An activity waits for:

- its launch call (it cannot start before the CPU asked for it);
- the activity before it on its stream (a stream runs in order);
- the activities a recorded stream wait names (nsys: ``cudaStreamWaitEvent`` on its stream for an event
  recorded on another: the work launched on that stream before the record; ``waits``);
- where none of those explains when it started (it started more than :data:`EXPLAINED_NS` after the latest of
  them), the activity of another stream of its rank that ended last before it started, if it ended within
  :data:`INFERRED_NS` of that start and was launched before it (an inferred dependency: an event wait the
  trace did not record).

A launch call waits for the rank's previous launch call (the CPU runs in order) and, where the CPU sat idle
more than :data:`BLOCKED_GAP_NS` before it while the GPU still ran what the rank had launched, and resumed
within :data:`BLOCKED_RESUME_NS` of the end of all of it, for the activity that ended last (the CPU was blocked
on the GPU: a synchronisation, a copy to the host). The members of a
collective (the k-th kernel of one collective in one step, on every rank of the run) end together.

Each edge's lag is what the trace shows: the edge that bound a node (the latest of its constraints) gets the
gap measured after it, the others no more than their default (0, or the CPU's own time between two launches),
so that replaying the trace's own durations puts every node where the trace has it, but where a collective
joins its ranks. What-ifs change durations, lags and edges (``scenarios``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from traceql.analyzers.replay.compiled import bound_edges, wanted
from traceql.analyzers.replay.engine import NEVER, Graph, Replayed
from traceql.analyzers.replay.waits import recorded_edges

EXPLAINED_NS = 5_000  # an activity that started this soon after its latest known constraint is explained by it
INFERRED_NS = 20_000  # an unexplained start this soon after another stream's end depends on that end
BLOCKED_GAP_NS = 50_000  # a CPU idle this long between two launches may have been blocked on the GPU ...
BLOCKED_RESUME_NS = 1_000_000  # ... when it resumed this soon after everything it had launched ended
CPU_MIN_NS = 5_000  # the CPU's own time between two launches where it was blocked in between
DISORDER_NS = 20_000  # an activity that began this long before the one before it on its stream ended: a broken
# trace (a stream runs in order; programmatic dependent launch overlaps a few microseconds at most)

OP_SCHEMA = {"run_id": pl.String, "rank": pl.Int32, "device": pl.Int32, "stream": pl.Int64, "start_ns": pl.Int64,
             "end_ns": pl.Int64, "launch_ns": pl.Int64, "correlation_id": pl.Int64, "kind": pl.String,
             "step": pl.Int32, "step_kind": pl.String, "collective": pl.String}
OP_COLUMNS = list(OP_SCHEMA)


# the kinds of edge, as :attr:`RunGraph.edge_kind` names them
STREAM, RECORDED, LAUNCH, CHAIN, BLOCKED, INFERRED = range(6)


@dataclass
class RunGraph:
    """A run's graph: ``graph`` for the engine (activities ``0 .. n_ops-1``, then launch calls); ``ops`` (one
    row per activity, in node order); ``edge_kind`` of each of ``graph``'s edges (:data:`STREAM` ...); per
    launch node, the activity it launched (``launch_op``); per activity its launch node (``launch_of``, -1 for
    none); counts of the edges found."""

    graph: Graph
    ops: pl.DataFrame
    n_ops: int
    edge_kind: np.ndarray
    launch_op: np.ndarray
    launch_of: np.ndarray
    recorded: int
    inferred: int
    unexplained: int  # activities that began more than INFERRED_NS after anything explains (they keep that gap)
    disordered: int  # activities that began more than DISORDER_NS before their stream's previous one ended
    measured: Replayed  # every node's times as the trace has them
    rank_key: np.ndarray  # per activity, its rank's place among the runs' ranks (0, 1, ...)
    # ``scenarios``' deferred all-reduces and order, once worked out, with the activities they are of
    deferred: tuple[pl.DataFrame, np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]] | None = field(
        default=None, repr=False, compare=False)
    # each edge's node, once worked out, with the edges' pointers it is of
    _edge_nodes: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False, compare=False)

    def edge_nodes(self, g: Graph | None = None) -> np.ndarray:
        """The node of each edge of ``g`` (default: :attr:`graph`; a what-if's, which may share its edges), the
        CSR's rows spelled out: worked out once for the graph's edges, which every what-if reads."""
        g = self.graph if g is None else g
        held = self._edge_nodes
        if held is None or held[0] is not g.pred_ptr:
            held = (g.pred_ptr, np.repeat(np.arange(g.n), np.diff(g.pred_ptr)))
            held[1].flags.writeable = False  # shared: read, never written
            if g.pred_ptr is self.graph.pred_ptr:
                self._edge_nodes = held
        return held[1]


def build(ops: pl.DataFrame, waits: pl.DataFrame | None = None) -> RunGraph:
    """The graph of one or more runs' activity (``ops``: :data:`OP_COLUMNS`, times on each run's common clock,
    ``kind`` compute, comm, memcpy or memset); ``waits``: recorded stream waits (``waits.WAITS``)."""
    carried = [c for c in ops.columns if c.startswith("_")]  # the caller's own columns, carried along
    ops = (ops.select(*OP_COLUMNS, *carried)
           .sort("run_id", "rank", "start_ns", "end_ns", "correlation_id", nulls_last=True, maintain_order=True)
           .with_row_index("node").with_columns(pl.col("node").cast(pl.Int64)))
    n = ops.height
    start, end = ops["start_ns"].to_numpy().astype(np.int64), ops["end_ns"].to_numpy().astype(np.int64)
    rank_key = ops.select(pl.struct("run_id", "rank").rank("dense").cast(pl.Int64) - 1).to_series().to_numpy()
    stream_key = ops.select(pl.struct("run_id", "rank", "device", "stream").rank("dense").cast(pl.Int64) - 1
                            ).to_series().to_numpy()
    edges: list[tuple[np.ndarray, np.ndarray, np.ndarray, int]] = []  # (node, predecessor, default lag, kind)

    def add(node: np.ndarray, pred: np.ndarray, lag: np.ndarray | int, kind: int) -> None:
        edges.append((node, pred, np.broadcast_to(np.asarray(lag, np.int64), node.shape), kind))

    by_stream = np.lexsort((start, stream_key))  # a stream runs in order
    same = np.r_[False, stream_key[by_stream][1:] == stream_key[by_stream][:-1]]
    add(by_stream[same], by_stream[np.flatnonzero(same) - 1], 0, STREAM)
    rec_node, rec_pred = recorded_edges(ops, waits)
    add(rec_node, rec_pred, 0, RECORDED)

    # launch calls: nodes n .. n+m-1, in call order a rank after another
    has = ops["launch_ns"].is_not_null().to_numpy()
    launch = ops["launch_ns"].fill_null(0).to_numpy().astype(np.int64)
    corr = ops["correlation_id"].fill_null(0).to_numpy().astype(np.int64)
    with_launch = np.flatnonzero(has)
    launch_op = with_launch[np.lexsort((corr[with_launch], launch[with_launch], rank_key[with_launch]))]
    m = len(launch_op)
    launch_node = n + np.arange(m, dtype=np.int64)
    launch_of = np.full(n, -1, np.int64)
    launch_of[launch_op] = launch_node
    add(launch_op, launch_node, 0, LAUNCH)
    l_time, l_rank = launch[launch_op], rank_key[launch_op]
    chained = np.r_[False, l_rank[1:] == l_rank[:-1]]
    gap = np.where(chained, l_time - np.r_[l_time[:1], l_time[:-1]], 0)
    blocked_on = _blocked_on(launch_op, l_time, l_rank, chained, gap, end)
    blocked = blocked_on >= 0
    add(launch_node[chained], launch_node[np.flatnonzero(chained) - 1],
        np.where(blocked, np.minimum(gap, CPU_MIN_NS), gap)[chained], CHAIN)
    add(launch_node[blocked], blocked_on[blocked], 0, BLOCKED)

    # where the constraints known so far do not explain an activity's start: inferred dependencies
    all_start, all_end = np.r_[start, l_time], np.r_[end, l_time]
    node, pred, lag = (np.concatenate([e[i] for e in edges]) for i in range(3))
    latest = _latest(n + m, node, all_end[pred] + np.minimum(lag, all_start[node] - all_end[pred]))[:n]
    inf_node, inf_pred = _inferred(start, end, latest, rank_key, stream_key, corr)
    kind = np.concatenate([*(np.full(len(e[0]), e[3], np.int8) for e in edges), np.full(len(inf_node), INFERRED,
                                                                                          np.int8)])
    edges.clear()  # a large run's graph is the replay's peak: each edge list held once
    joined = [np.r_[node, inf_node], np.r_[pred, inf_pred], np.r_[lag, np.zeros(len(inf_node), np.int64)]]
    del node, pred, lag
    graph, order = _bound(n + m, joined, all_start, all_end)
    explained = np.maximum(latest, _latest(n, inf_node, end[inf_pred]))
    group, tail = _collectives(ops, start, end)
    graph.group = np.r_[group, np.full(m, -1, np.int64)]
    graph.tail = np.r_[tail, np.zeros(m, np.int64)]
    prev = by_stream[np.flatnonzero(same) - 1]
    disordered = int((end[prev] - start[by_stream[same]] > DISORDER_NS).sum())
    return RunGraph(graph, ops, n, kind[order], launch_op, launch_of, len(rec_node), len(inf_node),
                    int((start - explained > INFERRED_NS).sum()), disordered, Replayed(all_start, all_end, 0),
                    rank_key)


def _latest(n: int, node: np.ndarray, value: np.ndarray) -> np.ndarray:
    out = np.full(n, NEVER, np.int64)
    np.maximum.at(out, node, value)
    return out


def _bound(total: int, edges: list[np.ndarray], start: np.ndarray, end: np.ndarray) -> tuple[Graph, np.ndarray]:
    """The engine's graph with each edge's lag as the trace shows it (module doc); the edges' order in it.
    ``edges``: node, predecessor, default lag (emptied: each array is let go once sorted)."""
    if wanted(total):  # a large graph: one compiled pass
        order, ptr, pred, lag = bound_edges(total, edges[0], edges[1], edges[2], start, end)
        edges.clear()
        return _graph(ptr, pred, lag, start, end), order
    node, pred = edges[0], edges[1]
    order = np.argsort(node * np.int64(total) + pred, kind="stable")  # by node, then predecessor
    node, pred, lag = node[order], pred[order], edges[2][order]
    edges.clear()
    gap = start[node] - end[pred]  # what the trace shows after each predecessor
    value = end[pred] + np.minimum(lag, gap)
    best = np.full(total, NEVER, np.int64)
    if len(node):  # each node's latest constraint: a maximum over its run of edges (sorted by node)
        heads = np.flatnonzero(np.r_[True, node[1:] != node[:-1]])
        best[node[heads]] = np.maximum.reduceat(value, heads)
    binding = np.zeros(len(node), bool)
    first = np.full(total, -1, np.int64)  # one binding edge a node: the first that reaches its latest value
    hit = np.flatnonzero(value == best[node])
    first[node[hit[::-1]]] = hit[::-1]
    binding[first[first >= 0]] = True
    lag = np.where(binding, gap, np.minimum(lag, gap))
    ptr = np.zeros(total + 1, np.int64)
    np.cumsum(np.bincount(node, minlength=total), out=ptr[1:])
    return _graph(ptr, pred, lag, start, end), order


def _graph(ptr: np.ndarray, pred: np.ndarray, lag: np.ndarray, start: np.ndarray, end: np.ndarray) -> Graph:
    """The engine's graph of these edges (CSR), its nodes' times as the trace has them."""
    base = np.where(np.diff(ptr) > 0, NEVER, start)  # a node nothing explains starts where it did
    return Graph(base.astype(np.int64), (end - start).astype(np.int64), ptr, pred.astype(np.int64),
                 lag.astype(np.int64), np.empty(0, np.int64), np.empty(0, np.int64),
                 np.argsort(start, kind="stable"))


def _blocked_on(launch_op: np.ndarray, l_time: np.ndarray, l_rank: np.ndarray, chained: np.ndarray,
                gap: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per launch call (in call order, a rank after another): the activity its CPU was blocked on before it
    (module doc), -1 for none. Blocked: the CPU sat idle more than :data:`BLOCKED_GAP_NS` while the GPU was still
    busy with what the rank had launched, and resumed within :data:`BLOCKED_RESUME_NS` of the moment all of that
    had ended (a synchronisation: the queue ran dry, then the CPU went on)."""
    out = np.full(len(l_time), -1, np.int64)
    starts = np.flatnonzero(~chained)
    for a, b in zip(starts, np.r_[starts[1:], len(l_time)], strict=True):
        e = end[launch_op[a:b]]
        reach = np.maximum.accumulate(e)  # the latest end of what was launched so far
        at = np.maximum.accumulate(np.where(e >= reach, np.arange(b - a), 0))  # which activity that is
        k = np.arange(1, b - a)
        before = reach[k - 1]
        drained = (before <= l_time[a + k]) & (before > l_time[a + k - 1]) & (gap[a + k] > BLOCKED_GAP_NS) & \
            (l_time[a + k] - before <= BLOCKED_RESUME_NS)
        out[a + k[drained]] = launch_op[a + at[k[drained] - 1]]
    return out


def _inferred(start: np.ndarray, end: np.ndarray, latest: np.ndarray, rank_key: np.ndarray,
              stream_key: np.ndarray, corr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Edges to activities whose start no known constraint explains (module doc): only to an activity launched
    before it (``corr``, the launch calls' numbers; 0 unknown), as a stream can wait only for work given
    before the wait."""
    ask = np.flatnonzero(start - latest > EXPLAINED_NS)
    if not len(ask):
        return np.empty(0, np.int64), np.empty(0, np.int64)
    nodes, preds = [], []
    for s in np.unique(stream_key[ask]):
        mine = ask[stream_key[ask] == s]
        r = rank_key[mine[0]]
        others = np.flatnonzero((rank_key == r) & (stream_key != s))
        if not len(others):
            continue
        others = others[np.argsort(end[others], kind="stable")]
        j = np.searchsorted(end[others], start[mine], side="right") - 1
        ok = j >= 0
        jj = np.where(ok, j, 0)
        found = others[jj]
        near = ok & (start[mine] - end[found] <= INFERRED_NS) & (end[found] > latest[mine])
        near &= (corr[found] < corr[mine]) | (corr[found] == 0) | (corr[mine] == 0)
        nodes.append(mine[near])
        preds.append(found[near])
    if not nodes:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return np.concatenate(nodes), np.concatenate(preds)


def _collectives(ops: pl.DataFrame, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per activity: its collective (-1 for none) and its end after the collective's last start (``tail``).
    The k-th kernel of a collective in a step (a normal or an isolated one), on every rank of its run, is one
    collective; one found on fewer
    ranks, or whose members ended before its last member started (clocks that disagree), is none."""
    comm = (ops.filter(pl.col("kind") == "comm")
            .with_columns(pl.col("step").fill_null(-1), pl.col("step_kind").fill_null("?"),
                          pl.col("collective").fill_null("?"))
            .sort("start_ns")
            .with_columns(pl.int_range(pl.len()).over("run_id", "rank", "step", "step_kind", "collective")
                          .alias("index")))
    n_ranks = ops.group_by("run_id").agg(pl.col("rank").n_unique().alias("n_ranks"))
    # an isolated step (step_<i>_nosync) shares its number with the step after it, not its collectives
    key = ["run_id", "step", "step_kind", "collective", "index"]
    comm = (comm.join(n_ranks, on="run_id")
            .filter(pl.len().over(key) == pl.col("n_ranks"), pl.col("n_ranks") > 1)
            .with_columns(pl.struct(key).rank("dense").cast(pl.Int64).alias("g") - 1))
    group = np.full(len(start), -1, np.int64)
    tail = np.zeros(len(start), np.int64)
    if comm.is_empty():
        return group, tail
    nodes, g = comm["node"].to_numpy(), comm["g"].to_numpy()
    last = np.full(g.max() + 1, NEVER, np.int64)
    np.maximum.at(last, g, start[nodes])
    t = end[nodes] - last[g]
    bad = np.zeros(g.max() + 1, bool)
    np.logical_or.at(bad, g, t < 0)
    keep = ~bad[g]
    group[nodes[keep]] = g[keep]
    tail[nodes[keep]] = t[keep]
    return group, tail
