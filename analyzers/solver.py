"""The training configuration that minimises the predicted iteration time for a global batch on a cluster.

A configuration gives each node a local batch ``b`` and ``v`` virtual workers (replicas sharing one copy of
the weights, run one after another), and the whole cluster ``a`` accumulation steps and a DDP bucket cap
``c``; it must reach the global batch exactly: ``a × Σ count × v × b == N``. A node computes for
``a × v × (forward + backward) + optimizer`` ms per iteration; the iteration takes the slowest node's time
plus the communication at ``c`` (exposed + overlap tax, both measured; without a trace at that cap the last
bucket's all-reduce, an estimate). Ties: fewer accumulation steps, fewer replicas (``Σ count × v``), the
larger cap, then the node times from the slowest down, then each node's ``(b, v)`` in cluster order.

The search is an exact dynamic programme over nodes, one per ``a``: a state is (samples so far, replicas so
far) and holds its best partial configurations ordered by (node times sorted from the slowest, choices).
That order survives adding the same node choice to two partials, so keeping the ``keep`` best per state
loses none of the ``keep`` best complete configurations (max is monotone; equal maxima are told apart by
the next node time, which is part of the order). Pure functions, no I/O.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, insort
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from traceql.analyzers.buckets import AllReduceTime

NAIVE_CAP_MB = 25.0  # DDP's default bucket_cap_mb: the equal split's cap
BOUND_GROWTH = 1.1  # how fast the search's bound grows while too few configurations lie within it


@dataclass(frozen=True)
class BatchCost:
    """A local batch that fits on a GPU type: its phases' times (ms) and the replicas that fit at it."""

    batch: int
    forward_ms: float
    backward_ms: float
    optimizer_ms: float
    virtual_workers: int

    def compute_ms(self, accumulation: int, virtual: int) -> float:
        return accumulation * virtual * (self.forward_ms + self.backward_ms) + self.optimizer_ms


@dataclass(frozen=True)
class CapCost:
    """A bucket cap's communication per iteration; ``cap_mb`` None: no communication (one GPU, no profile)."""

    cap_mb: float | None
    exposed_ms: float
    tax_ms: float
    estimated: bool = False

    @property
    def comm_ms(self) -> float:
        return self.exposed_ms + self.tax_ms


NO_COMM = CapCost(None, 0.0, 0.0)


@dataclass(frozen=True)
class Node:
    name: str
    gpu: str
    count: int


@dataclass(frozen=True)
class NodeChoice:
    node: Node
    batch: int
    virtual: int
    compute_ms: float

    @property
    def samples(self) -> int:
        return self.node.count * self.virtual * self.batch

    @property
    def replicas(self) -> int:
        return self.node.count * self.virtual


@dataclass(frozen=True)
class Config:
    """One configuration and its prediction; ``slowest`` the node times sorted from the slowest."""

    accumulation: int
    cap: CapCost
    nodes: tuple[NodeChoice, ...]
    slowest: tuple[float, ...]
    time_ms: float

    @property
    def global_batch(self) -> int:
        return self.accumulation * sum(n.samples for n in self.nodes)

    @property
    def replicas(self) -> int:
        return sum(n.replicas for n in self.nodes)

    def key(self) -> tuple[Any, ...]:
        """The order of configurations: predicted time, then the tie rules."""
        return (self.time_ms, self.accumulation, self.replicas, -(self.cap.cap_mb or 0.0), self.slowest,
                tuple((n.batch, n.virtual) for n in self.nodes))

    def to_dict(self) -> dict[str, Any]:
        return {"iteration_ms": self.time_ms, "compute_ms": self.slowest[0], "comm_ms": self.cap.comm_ms,
                "exposed_comm_ms": self.cap.exposed_ms, "overlap_tax_ms": self.cap.tax_ms,
                "samples_per_s": 1000.0 * self.global_batch / self.time_ms if self.time_ms > 0 else None,
                "accumulation": self.accumulation, "cap_mb": self.cap.cap_mb, "replicas": self.replicas,
                "estimated": self.cap.estimated,
                "nodes": [{"name": n.node.name, "gpu": n.node.gpu, "count": n.node.count, "batch": n.batch,
                           "virtual_workers": n.virtual, "samples": n.samples, "compute_ms": n.compute_ms}
                          for n in self.nodes]}


@dataclass(frozen=True)
class Space:
    """What may be chosen: per GPU type the batches that fit, the caps, and the limits on ``a`` and ``v``."""

    nodes: tuple[Node, ...]
    costs: Mapping[str, Sequence[BatchCost]]
    caps: tuple[CapCost, ...] = ()
    max_accumulation: int = 8
    max_virtual: int = 4

    @property
    def gpus(self) -> int:
        return sum(n.count for n in self.nodes)

    def comm_caps(self) -> tuple[CapCost, ...]:
        """The caps to choose among: none (no communication) on one GPU or without a buckets profile."""
        return self.caps if self.gpus > 1 and self.caps else (NO_COMM,)

    def choices(self, node: Node, accumulation: int) -> list[NodeChoice]:
        return [NodeChoice(node, c.batch, v, c.compute_ms(accumulation, v))
                for c in sorted(self.costs.get(node.gpu, ()), key=lambda c: c.batch)
                for v in range(1, min(self.max_virtual, c.virtual_workers) + 1)]


def batch_costs(memory: Mapping[str, Any], compute: Mapping[str, Any]) -> list[BatchCost]:
    """The batches of a GPU type's compute profile that its memory profile says fit, by batch."""
    fits = {row["batch"]: row["virtual_workers"] for row in memory["batches"] if row["fits"]}
    return [BatchCost(row["batch"], row["forward_ms"], row["backward_ms"], row["optimizer_ms"], fits[row["batch"]])
            for row in sorted(compute["batches"], key=lambda r: r["batch"]) if row["batch"] in fits]


def cap_costs(buckets: Mapping[str, Any]) -> list[CapCost]:
    """Each cap of a buckets profile: exposed communication + overlap tax as measured; where no trace
    measured them (null), the last bucket's all-reduce (what backward cannot hide) and no tax, estimated: as
    measured, else the profile's all-reduce model (``buckets.AllReduceTime``) at the last bucket's bytes."""
    model = AllReduceTime.from_profile(buckets.get("comm_model"))
    out = []
    for row in sorted(buckets["caps"], key=lambda r: r["cap_mb"]):
        exposed, tax = row["exposed_comm_ms"], row["overlap_tax_ms"]
        estimated = exposed is None or tax is None
        if exposed is None:
            last = row.get("bucket_bytes") or []
            exposed = (row["allreduce_ms"][-1] if row["allreduce_ms"] else
                       round(model.alone(float(last[-1])) / 1e6, 4) if model and last else 0.0)
        out.append(CapCost(row["cap_mb"], exposed, tax or 0.0, estimated))
    return out


def _descending(ms: float) -> float:
    return -ms


def _states(space: Space, accumulation: int, target: int, keep: int, *, bound: float = math.inf,
            by_replicas: bool = True) -> list[tuple]:
    """The ``keep`` best (node times from the slowest, (b, v) per node, choices) reaching ``target`` samples
    per accumulation step, per total of replicas (``by_replicas``; else over all). ``bound``: node choices
    whose time plus the least communication exceeds it are left out (no configuration of them can beat it)."""
    least_comm = min(c.comm_ms for c in space.comm_caps())
    options = [[o for o in space.choices(node, accumulation) if not o.compute_ms + least_comm > bound]
               for node in space.nodes]
    most = [max((o.samples for o in opts), default=0) for opts in options]
    least = [min((o.samples for o in opts), default=0) for opts in options]
    states: dict[tuple[int, int], list[tuple]] = {(0, 0): [((), (), ())]}
    for i, opts in enumerate(options):
        room_high, room_low = sum(most[i + 1:]), sum(least[i + 1:])
        grown: dict[tuple[int, int], list[tuple]] = defaultdict(list)
        for (samples, replicas), partials in states.items():
            for o in opts:
                total = samples + o.samples
                if total + room_low > target or total + room_high < target:
                    continue
                for slowest, order, picked in partials:
                    times = list(slowest)
                    insort(times, o.compute_ms, key=_descending)  # the slowest first
                    grown[(total, replicas + o.replicas if by_replicas else 0)].append(
                        (tuple(times), order + ((o.batch, o.virtual),), picked + (o,)))
        states = {k: heapq.nsmallest(keep, v, key=lambda p: p[:2]) for k, v in grown.items()}
    return [p for (samples, _replicas), partials in states.items() if samples == target for p in partials]


def _candidates(space: Space, global_batch: int, keep: int, bound: float, *, by_replicas: bool = True,
                ) -> list[Config]:
    found: list[Config] = []
    for a in range(1, space.max_accumulation + 1):
        if global_batch % a == 0:
            for slowest, _order, picked in _states(space, a, global_batch // a, keep, bound=bound,
                                                   by_replicas=by_replicas):
                found.extend(Config(a, cap, picked, slowest, slowest[0] + cap.comm_ms) for cap in space.comm_caps())
    return found


def _bounds(space: Space, global_batch: int) -> list[float]:
    """The times a search may be bounded by, least first: each node choice's time plus the least
    communication, from the least time any configuration can take; infinity last."""
    least_comm = min(c.comm_ms for c in space.comm_caps())
    steps = [a for a in range(1, space.max_accumulation + 1) if global_batch % a == 0]
    times = [[o.compute_ms + least_comm for a in steps for o in space.choices(node, a)] for node in space.nodes]
    floor = max((min(t, default=math.inf) for t in times), default=math.inf)
    return sorted({t for ts in times for t in ts if t >= floor}) + [math.inf]


def solve(space: Space, global_batch: int, *, top: int = 5) -> list[Config]:
    """The best configuration reaching ``global_batch`` and the ``top`` next best, by :meth:`Config.key`;
    empty when none reaches it.

    Both passes are bounded: node choices slower than a bound are left out, which removes only
    configurations slower than it. The first pass, without replicas in the state, finds the ``top + 1``
    least times (its order keeps each accumulation's fastest), the bound growing through the choices' own
    times, about 10 % at a time, until that many configurations lie within it (a search bounded well above
    the answer is the slow one); the exact pass is then bounded by the last of those times."""
    if global_batch not in reachable(space, global_batch):
        return []
    keep, bounds, i = top + 1, _bounds(space, global_batch), 0
    while True:
        times = sorted(c.time_ms for c in _candidates(space, global_batch, keep, bounds[i], by_replicas=False))
        if len(times) >= keep and times[keep - 1] <= bounds[i] or i == len(bounds) - 1:
            break
        i = max(i + 1, bisect_left(bounds, bounds[i] * BOUND_GROWTH))
    if not times:
        return []
    bound = times[min(keep, len(times)) - 1]
    return heapq.nsmallest(keep, _candidates(space, global_batch, keep, bound), key=Config.key)


def reachable(space: Space, limit: int) -> list[int]:
    """Every global batch up to ``limit`` that some configuration reaches exactly."""
    out: set[int] = set()
    for a in range(1, space.max_accumulation + 1):
        sums = {0}
        for node in space.nodes:
            steps = {o.samples for o in space.choices(node, a)}
            sums = {s + x for s in sums for x in steps if a * (s + x) <= limit}
        out.update(a * s for s in sums)
    return sorted(out - {0})


def naive(space: Space, global_batch: int) -> Config | str:
    """The equal split: ``global_batch / GPUs`` on every GPU, one worker, no accumulation, the cap closest to
    25 MB; the reason when it is no configuration of the space."""
    per, left = divmod(global_batch, space.gpus)
    if left:
        return f"{global_batch} samples do not split equally over {space.gpus} GPUs"
    picked = []
    for node in space.nodes:
        cost = next((c for c in space.costs.get(node.gpu, ()) if c.batch == per), None)
        if cost is None:
            return f"batch {per} is not a profiled batch that fits on {node.gpu}"
        picked.append(NodeChoice(node, per, 1, cost.compute_ms(1, 1)))
    cap = min(space.comm_caps(), key=lambda c: (abs((c.cap_mb or NAIVE_CAP_MB) - NAIVE_CAP_MB), c.cap_mb or 0))
    slowest = tuple(sorted((p.compute_ms for p in picked), reverse=True))
    return Config(1, cap, tuple(picked), slowest, slowest[0] + cap.comm_ms)


def nearest(values: Iterable[int], target: int, *, each_side: int = 3) -> list[int]:
    """Up to ``each_side`` values below ``target`` and as many above, in order."""
    ordered = sorted(set(values))
    below = [v for v in ordered if v < target][-each_side:]
    return below + [v for v in ordered if v > target][:each_side]
