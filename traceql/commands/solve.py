"""`traceql solve`: the configuration (local batch and virtual workers per node, accumulation steps, bucket
cap) that minimises the predicted iteration time for a global batch on a cluster, from profile files."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from traceql.analyzers import solver
from traceql.analyzers.solver import Config, Node, Space
from traceql.errors import InputError, OptionError
from traceql.tuning import Profiles, read_cluster, read_profiles

__all__ = ["SolveResult", "solve"]

BETWEEN_NODES = ("network", "inter-node")  # a buckets profile's interconnect measured across nodes
SUGGEST_UP_TO = 4  # infeasible --global-batch N: reachable batches up to this many times N are suggested


@dataclass
class SolveResult:
    """The best configuration and the runner-ups (``configs``, best first), the equal split it is compared
    with (``naive``, or why it is not feasible), and where the figures came from."""

    global_batch: int
    model: str
    nodes: tuple[Node, ...]
    configs: list[Config]
    naive: Config | None
    naive_reason: str | None
    limits: dict[str, int]
    communication: dict[str, Any] | None
    notes: list[str] = field(default_factory=list)

    @property
    def best(self) -> Config:
        return self.configs[0]

    @property
    def gain_pct(self) -> float | None:
        """How much faster the best configuration is predicted to be than the equal split (% of throughput)."""
        if self.naive is None or not 0 < self.best.time_ms < math.inf:
            return None
        gain = 100.0 * (self.naive.time_ms / self.best.time_ms - 1.0)
        return gain if math.isfinite(gain) else None

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON values (a number that is not finite is null: JSON has no NaN or Infinity)."""
        return cast("dict[str, Any]", _finite({"global_batch": self.global_batch, "model": self.model,
                "cluster": [{"name": n.name, "gpu": n.gpu, "count": n.count} for n in self.nodes],
                "gpus": sum(n.count for n in self.nodes), **self.limits, "communication": self.communication,
                "best": self.best.to_dict(), "runner_ups": [c.to_dict() for c in self.configs[1:]],
                "naive": {"feasible": self.naive is not None, "reason": self.naive_reason,
                          "config": self.naive.to_dict() if self.naive else None, "gain_pct": self.gain_pct},
                "notes": self.notes}))


def _finite(value: Any) -> Any:
    """``value`` with every float that is not finite replaced by None, through dicts and lists."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


MOST = 1024  # --max-accumulation, --max-virtual and --top: each bound makes the search longer, past it hopelessly


def _at_least(value: int, least: int, option: str, most: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least or (most is not None and value > most):
        upto = f" and at most {most:,}" if most is not None else ""
        raise OptionError(f"{option} must be an integer of at least {least}{upto}, got {value!r}")


def _costs(profiles: Profiles, nodes: tuple[Node, ...]) -> dict[str, list[solver.BatchCost]]:
    costs: dict[str, list[solver.BatchCost]] = {}
    for node in nodes:
        if node.gpu not in costs:
            memory = profiles.require("memory", node.gpu, node.name)
            compute = profiles.require("compute", node.gpu, node.name)
            costs[node.gpu] = solver.batch_costs(memory, compute)
            if not costs[node.gpu]:
                raise InputError(f"no batch that fits on {node.gpu!r} is in its compute profile "
                                 f"({profiles.path('compute', node.gpu)})", path=str(profiles.path("memory", node.gpu)))
    return costs


def _buckets(profiles: Profiles, nodes: tuple[Node, ...], notes: list[str],
             ) -> tuple[tuple[solver.CapCost, ...], dict[str, Any] | None]:
    """The caps of the buckets profile that fits the cluster best (of a GPU in it, measured on the nearest
    number of GPUs) and where they come from; notes on how far that measurement is from this cluster."""
    found, gpus = profiles.of_kind("buckets"), sum(n.count for n in nodes)
    if gpus == 1:
        notes.append("one GPU: no communication, no bucket cap to choose")
        return (), None
    if not found:
        notes.append(f"no buckets profile in {profiles.folder}: communication counted as 0, no bucket cap chosen")
        return (), None
    ours = [g for g in dict.fromkeys(n.gpu for n in nodes) if g in found] or list(found)
    gpu = min(ours, key=lambda g: abs(found[g]["world_size"] - gpus))
    data = found[gpu]
    where = f"communication from {profiles.path('buckets', gpu)} ({data['world_size']} GPUs, {data['interconnect']})"
    if data["world_size"] != gpus:
        where += f"; this cluster has {gpus} GPUs: taken as measured"
    if gpu not in {n.gpu for n in nodes}:
        where += f"; measured on {gpu}, which no node has"
    if len(nodes) > 1 and data["interconnect"] not in BETWEEN_NODES:
        where += f"; measured within one node, this cluster spans {len(nodes)}: likely an underestimate"
    notes.append(where)
    caps = tuple(solver.cap_costs(data))
    if not caps:
        notes.append(f"{profiles.path('buckets', gpu)} lists no cap: communication counted as 0, no cap chosen")
        return (), None
    return caps, {"file": str(profiles.path("buckets", gpu)), "gpu": gpu, "world_size": data["world_size"],
                  "interconnect": data["interconnect"]}


def _unreachable(space: Space, global_batch: int, max_accumulation: int, max_virtual: int) -> OptionError:
    near = solver.nearest(solver.reachable(space, SUGGEST_UP_TO * global_batch), global_batch)
    return OptionError(
        f"--global-batch {global_batch}: no configuration reaches it exactly (accumulation × Σ count × virtual "
        f"workers × batch, with accumulation ≤ {max_accumulation}, virtual workers ≤ {max_virtual} "
        f"and the profiled batches that fit); "
        + (f"reachable near it: {', '.join(map(str, near))}" if near else
           f"none is reachable up to {SUGGEST_UP_TO * global_batch}"))


def solve(profile_dir: str | Path, global_batch: int, cluster: str | Path | Mapping[str, Any], *,
          max_accumulation: int = 8, max_virtual: int = 4, top: int = 5) -> SolveResult:
    """The configuration that minimises the predicted iteration time for ``global_batch`` samples per
    iteration on ``cluster`` (a cluster file, or its object), from the profiles in ``profile_dir``, and the
    ``top`` next best (``traceql.analyzers.solver``).

    Args:
        profile_dir: the folder of profiles (``memory-``, ``compute-``, ``buckets-<gpu>.json``).
        global_batch: samples per iteration over the whole cluster (1 or more).
        cluster: the cluster file (``{"nodes": [{"name", "gpu", "count"}, ...]}``), or that object.
        max_accumulation: at most this many gradient accumulation steps (1 to 1,024).
        max_virtual: at most this many virtual workers per GPU (1 to 1,024).
        top: how many runner-ups to list (0 to 1,024).

    Returns:
        The best configuration and the runner-ups, the equal split it is compared with, and where the
        figures came from.

    Raises:
        OptionError: for an option out of range, or a ``global_batch`` no configuration reaches exactly (the
            reachable ones near it named).
        InputError: for a cluster or profiles that cannot be read, or a GPU of the cluster without a memory
            and compute profile, or with no batch that fits.
    """
    _at_least(global_batch, 1, "--global-batch")
    _at_least(max_accumulation, 1, "--max-accumulation", MOST)
    _at_least(max_virtual, 1, "--max-virtual", MOST)
    _at_least(top, 0, "--top", MOST)
    nodes = read_cluster(cluster)
    profiles = read_profiles(profile_dir)
    notes: list[str] = []
    caps, communication = _buckets(profiles, nodes, notes)
    # no configuration reaching N (nor any batch suggested near it) has more accumulation steps or virtual
    # workers than SUGGEST_UP_TO × N: larger limits change no answer, only how long the search takes
    reach = SUGGEST_UP_TO * global_batch
    space = Space(nodes, _costs(profiles, nodes), caps, min(max_accumulation, reach), min(max_virtual, reach))
    configs = solver.solve(space, global_batch, top=top)
    if not configs:
        raise _unreachable(space, global_batch, max_accumulation, max_virtual)
    naive = solver.naive(space, global_batch)
    shown = configs + ([naive] if isinstance(naive, Config) else [])
    if guessed := sorted({c.cap.cap_mb for c in shown if c.cap.estimated and c.cap.cap_mb is not None}):
        notes.append(f"cap(s) {', '.join(f'{c:g}' for c in guessed)} MB: no trace measured the exposed "
                     "communication; estimated as the last bucket's all-reduce, no overlap tax (marked ~)")
    return SolveResult(
        global_batch=global_batch, model=next(iter(profiles.data.values()))["model"], nodes=nodes, configs=configs,
        naive=naive if isinstance(naive, Config) else None, naive_reason=None if isinstance(naive, Config) else naive,
        limits={"max_accumulation": max_accumulation, "max_virtual": max_virtual, "top": top},
        communication=communication, notes=notes)
