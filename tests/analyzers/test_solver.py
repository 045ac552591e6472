"""The solver against a brute-force search over the same space (written here only): the best configuration
and the runner-ups, in order, with the tie rules; a case worked out by hand; what cannot be reached."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from tests import profiles as synth
from tests.paths import ROOT
from traceql.analyzers import solver
from traceql.analyzers.solver import Node, Space
from traceql.commands.solve import solve as run_solve
from traceql.errors import OptionError
from traceql.tuning import read_cluster, read_profiles

FAST = Node("fast", synth.FAST, 1)
SLOW = Node("slow", synth.SLOW, 1)
EXAMPLES = ROOT / "datasets" / "examples"


def brute_force(nodes: tuple[Node, ...], raw: dict[tuple[str, str], dict[str, Any]], buckets: dict | None,
                global_batch: int, max_accumulation: int = 8, max_virtual: int = 4) -> list[tuple]:
    """Every configuration that reaches the global batch, as sort keys (time, a, replicas, -cap, node times
    from the slowest, (b, v) per node), sorted."""
    options = {}
    for gpu in {n.gpu for n in nodes}:
        fits = {r["batch"]: r["virtual_workers"] for r in raw[("memory", gpu)]["batches"] if r["fits"]}
        options[gpu] = [(r, v) for r in raw[("compute", gpu)]["batches"] if r["batch"] in fits
                        for v in range(1, min(max_virtual, fits[r["batch"]]) + 1)]
    caps = [(None, 0.0)]
    if sum(n.count for n in nodes) > 1 and buckets and buckets["caps"]:
        caps = [(c["cap_mb"], (c["exposed_comm_ms"] if c["exposed_comm_ms"] is not None else c["allreduce_ms"][-1])
                 + (c["overlap_tax_ms"] or 0.0)) for c in buckets["caps"]]
    found = []
    for a in range(1, max_accumulation + 1):
        for combo in itertools.product(*(options[n.gpu] for n in nodes)):
            if a * sum(n.count * v * r["batch"] for n, (r, v) in zip(nodes, combo, strict=True)) != global_batch:
                continue
            times = [a * v * (r["forward_ms"] + r["backward_ms"]) + r["optimizer_ms"] for r, v in combo]
            replicas = sum(n.count * v for n, (_r, v) in zip(nodes, combo, strict=True))
            for cap_mb, comm in caps:
                found.append((max(times) + comm, a, replicas, -(cap_mb or 0.0), tuple(sorted(times, reverse=True)),
                              tuple((r["batch"], v) for r, v in combo)))
    return sorted(found)


def space_of(nodes: tuple[Node, ...], raw: dict, buckets: dict | None, **limits: int) -> Space:
    costs = {g: solver.batch_costs(raw[("memory", g)], raw[("compute", g)]) for g in {n.gpu for n in nodes}}
    return Space(nodes, costs, tuple(solver.cap_costs(buckets)) if buckets else (), **limits)


def keyed(profiles: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(p["kind"], p["gpu"]): p for p in profiles}


def check(space: Space, raw: dict, buckets: dict | None, global_batch: int, top: int = 5) -> list[solver.Config]:
    """Solve, and assert the answer is brute force's, each configuration within the space's limits."""
    got = solver.solve(space, global_batch, top=top)
    want = brute_force(space.nodes, raw, buckets, global_batch, space.max_accumulation, space.max_virtual)
    assert [c.key() for c in got] == want[:top + 1]
    for c in got:
        assert c.global_batch == global_batch and 1 <= c.accumulation <= space.max_accumulation
        for n in c.nodes:
            cost = next(b for b in space.costs[n.node.gpu] if b.batch == n.batch)
            fits = {r["batch"]: r for r in raw[("memory", n.node.gpu)]["batches"]}[n.batch]
            assert fits["fits"] and 1 <= n.virtual <= min(space.max_virtual, fits["virtual_workers"]), n
            assert n.compute_ms == cost.compute_ms(c.accumulation, n.virtual)
    return got


SYNTH = keyed(synth.synthetic())
BUCKETS = SYNTH[("buckets", synth.FAST)]


@pytest.mark.parametrize("nodes", [
    (FAST, SLOW), (SLOW, FAST), (Node("n0", synth.FAST, 4),), (Node("n0", synth.FAST, 2), Node("n1", synth.FAST, 2)),
    (Node("n0", synth.FAST, 2), Node("n1", synth.SLOW, 3)), (FAST, SLOW, Node("n2", synth.SLOW, 2)),
], ids=["mixed", "mixed-reversed", "one-node-4", "two-nodes-2x2", "2fast-3slow", "three-nodes"])
@pytest.mark.parametrize("global_batch", [2, 3, 8, 12, 16, 24, 30, 48, 64])
def test_synthetic_clusters_match_brute_force(nodes: tuple[Node, ...], global_batch: int) -> None:
    check(space_of(nodes, SYNTH, BUCKETS), SYNTH, BUCKETS, global_batch)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("with_buckets", [True, False])
def test_irregular_profiles_match_brute_force(seed: int, with_buckets: bool) -> None:
    gpus = [f"Test GPU u{i}" for i in range(3)]
    raw = keyed([p for i, g in enumerate(gpus) for p in synth.uneven(10 * seed + i, g)])
    buckets = BUCKETS if with_buckets else None
    nodes = (Node("a", gpus[0], 1 + seed % 2), Node("b", gpus[1], 2), Node("c", gpus[2], 1))
    limits = {"max_accumulation": 1 + seed % 4, "max_virtual": 1 + seed % 3}
    solved = 0
    for global_batch in (4, 6, 8, 12, 16, 20, 24, 32, 40, 48, 64):
        solved += bool(check(space_of(nodes, raw, buckets, **limits), raw, buckets, global_batch, top=3 + seed))
    assert solved >= 3


@pytest.mark.parametrize("top", [0, 1, 40])
def test_long_and_short_lists_of_runner_ups(top: int) -> None:
    nodes = (Node("n0", synth.FAST, 2), Node("n1", synth.SLOW, 1), Node("n2", synth.FAST, 1))
    for global_batch in (8, 12, 20, 36):
        got = check(space_of(nodes, SYNTH, BUCKETS), SYNTH, BUCKETS, global_batch, top=top)
        assert len(got) == top + 1


def test_a_case_worked_by_hand() -> None:
    """fast computes 3s + 2 ms for s samples a step, slow 6s + 4; caps cost 4 (10 MB), 3 (25), ~5 (50).
    12 samples: fast 8 and slow 4 take 26 and 28 ms (a = 2 and a = 4 also reach 28: fewer steps win); at
    25 MB 28 + 3 = 31 ms. Every split of fast's 8 samples (8x1, 4x2, 2x4) and slow's 4 (4x1, 2x2, 1x4) ties:
    the fewest replicas first, then (b, v) in node order."""
    got = solver.solve(space_of((FAST, SLOW), SYNTH, BUCKETS), 12, top=5)
    assert [(c.time_ms, c.accumulation, c.cap.cap_mb) for c in got] == [(31.0, 1, 25)] * 6
    assert [tuple((n.batch, n.virtual) for n in c.nodes) for c in got] == [
        ((8, 1), (4, 1)), ((4, 2), (4, 1)), ((8, 1), (2, 2)), ((4, 2), (2, 2)), ((2, 4), (4, 1)), ((8, 1), (1, 4))]
    assert [n.compute_ms for n in got[0].nodes] == [26.0, 28.0]
    best = got[0].to_dict()
    assert best["iteration_ms"] == 31.0 and best["comm_ms"] == 3.0 and best["samples_per_s"] == 12000 / 31
    # 8 samples: fast 6 (2x3: 20 ms), slow 2 (16 ms) → 23 ms; the equal split (4 each: 14, 28 ms) takes 31
    space = space_of((FAST, SLOW), SYNTH, BUCKETS)
    best8 = solver.solve(space, 8, top=0)
    assert len(best8) == 1 and best8[0].time_ms == 23.0
    assert [(n.batch, n.virtual) for n in best8[0].nodes] == [(2, 3), (2, 1)]
    naive = solver.naive(space, 8)
    assert isinstance(naive, solver.Config) and naive.time_ms == 31.0 and naive.cap.cap_mb == 25
    assert solver.naive(space, 12) == "batch 6 is not a profiled batch that fits on Test GPU fast"
    assert solver.naive(space, 7) == "7 samples do not split equally over 2 GPUs"


def test_caps_without_a_trace_are_estimated() -> None:
    caps = solver.cap_costs(BUCKETS)
    assert [(c.cap_mb, c.comm_ms, c.estimated) for c in caps] == [(10, 4.0, False), (25, 3.0, False), (50, 5.0, True)]


def test_one_gpu_or_no_buckets_has_no_communication() -> None:
    for nodes, buckets in (((FAST,), BUCKETS), ((FAST, SLOW), None)):
        got = check(space_of(nodes, SYNTH, buckets), SYNTH, buckets, 8)
        assert all(c.cap.cap_mb is None and c.cap.comm_ms == 0 for c in got)


def test_what_cannot_be_reached() -> None:
    space = space_of((FAST, SLOW), SYNTH, BUCKETS)
    assert solver.solve(space, 1) == [] and solver.solve(space, 97) == []
    assert solver.nearest(solver.reachable(space, 4), 1) == [2, 3, 4]
    assert solver.nearest(solver.reachable(space, 4 * 97), 97) == [84, 88, 96]  # at most 8 x 12 samples


def _real_folders() -> list[Path]:
    """The measured profiles shipped in datasets/examples/profiles/ (GPT-2 on an H200 and an H100)."""
    found = sorted(p for p in (EXAMPLES / "profiles").glob("*/") if any(p.glob("*.json")))
    assert found, "datasets/examples/profiles/ holds no profiles"
    return found


@pytest.mark.parametrize("folder", _real_folders(), ids=lambda p: p.name)
@pytest.mark.parametrize("cluster", ["two-h200.json", "h200-h100.json"])
def test_measured_profiles_match_brute_force(folder: Path, cluster: str) -> None:
    nodes = read_cluster(EXAMPLES / "clusters" / cluster)
    profiles = read_profiles(folder)
    assert all(profiles.get(kind, n.gpu) is not None for n in nodes for kind in ("memory", "compute"))
    solved = 0
    for global_batch in (5, 8, 16, 24, 32, 48, 64, 96, 100, 128):
        try:
            result = run_solve(folder, global_batch, EXAMPLES / "clusters" / cluster, top=5)
        except OptionError as err:  # unreachable: brute force finds nothing either
            assert "no configuration reaches it" in str(err)
            assert brute_force(nodes, profiles.data, None, global_batch) == []
            continue
        buckets = profiles.get("buckets", result.communication["gpu"]) if result.communication else None
        assert [c.key() for c in result.configs] == brute_force(nodes, profiles.data, buckets, global_batch)[:6]
        solved += 1
    assert solved
