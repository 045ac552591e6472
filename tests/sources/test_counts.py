"""`traceql info --format json` agrees with counts and sums taken directly with sqlite3: kernel counts on every
real export; top kernels, collectives and steps on the shipped runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.oracle import collectives, kernel_groups, rows, step_gpu_extents, step_ranges
from tests.paths import DDP_FILES, DDP_TRACE, INRUN_TRACE, RUNS, SINGLE_FILE, SINGLE_TRACE, corpus, shared_sqlite_files


def direct_counts(path: Path) -> dict:
    by_device = rows(path, "SELECT deviceId, count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY deviceId")
    nccl = rows(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName "
                      "WHERE s.value LIKE 'nccl%'")[0][0]
    return {"total": rows(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0][0],
            "by_device": {str(k): v for k, v in by_device}, "nccl": nccl}


FILES = [*DDP_FILES, SINGLE_FILE, *(corpus(f, id=f.name) for f in shared_sqlite_files())]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_info_counts_match_sqlite3(invoke, path: Path) -> None:
    result = invoke("info", path, "--format", "json")
    assert result.exit_code == 0, result.stderr
    info = json.loads(result.stdout)
    expected = direct_counts(path)
    assert info["kernels"]["total"] == expected["total"]
    assert info["kernels"]["by_device"] == expected["by_device"]
    assert info["kernels"]["by_kind"].get("comm", 0) == expected["nccl"]
    assert sum(info["kernels"]["by_kind"].values()) == expected["total"]
    (run,) = info["runs"]
    assert run["path"] == str(path)
    assert run["schema_version"] and run["tool_version"]


@pytest.mark.corpus
def test_every_schema_version_is_read() -> None:
    """The corpus spans the nsys schemas the model must read; each one was loaded above."""
    files = shared_sqlite_files()
    versions = set()
    for f in files:
        names = {r[0] for r in rows(f, "SELECT name FROM sqlite_master WHERE type = 'table'")}
        meta = "META_DATA_EXPORT" if "META_DATA_EXPORT" in names else "EXPORT_META_DATA"
        versions.add(rows(f, f"SELECT value FROM {meta} WHERE name = 'EXPORT_SCHEMA_VERSION'")[0][0])
    assert {"2.9.1", "3.13.2", "3.16.1", "3.20.3", "3.24.14", "3.25.0"} <= versions


# two ranks together, one rank alone, an isolated run, a run with isolated steps, FSDP2's several collectives
SHIPPED = [DDP_TRACE, DDP_FILES[0], SINGLE_TRACE, INRUN_TRACE, RUNS / "gpt2-fsdp2-nsys"]
TOP = 10


def _info(invoke, path: Path) -> dict:
    result = invoke("info", path, "--format", "json", "--top", TOP)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_top_kernels_match_sqlite3(invoke, path: Path) -> None:
    """Each top kernel's count, total and mean GPU time (ns) and share of all kernels' time (%, 2 decimals)
    against sqlite3's sums of ``end - start`` by demangled name, the largest first (on these runs each name
    info shows is one demangled name: a kernel info merged or split would not line up)."""
    info = _info(invoke, path)
    groups = kernel_groups(path)
    all_ns = sum(g["total_ns"] for g in groups)
    assert info["kernels"]["total_ns"] == all_ns
    top = info["top_kernels"]
    assert len(top) == min(TOP, len(groups))
    for got, want in zip(top, groups, strict=False):
        assert got["short_name"] == want["short"], (got, want["name"])
        assert got["kernel"] == want["short"] or (got["kernel"].startswith(f"{want['short']} [")
                                                  and got["kernel"][len(want["short"]) + 2:-1] in want["name"])
        assert got["kind"] == ("comm" if want["comm"] else "compute")
        assert (got["count"], got["total_ns"]) == (want["count"], want["total_ns"]), got["kernel"]
        assert abs(got["mean_ns"] - want["total_ns"] / want["count"]) <= 0.5, got["kernel"]  # rounded to the ns
        assert abs(got["pct"] - 100 * want["total_ns"] / all_ns) <= 0.005 + 1e-9, got["kernel"]  # to 0.01 %


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_collectives_match_sqlite3(invoke, path: Path) -> None:
    """Each collective (``AllReduce/RING/LL``, from the NCCL kernel's name): its kernels' count and total GPU
    time, the largest total first."""
    info = _info(invoke, path)
    want = collectives(path)
    got = {c["collective"]: (c["count"], c["total_ns"]) for c in info["collectives"]}
    assert got == want
    assert [c["total_ns"] for c in info["collectives"]] == sorted(got_ns for _, got_ns in want.values())[::-1]
    assert sum(n for n, _ in want.values()) == info["kernels"]["by_kind"].get("comm", 0)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_steps_match_the_nvtx_ranges(invoke, path: Path) -> None:
    """info counts the NVTX ``step_<i>`` (sync) and ``step_<i>_nosync`` (isolated) ranges of each process; the
    steps relation behind it holds each range's start and end (``cpu_*``) and the first start and last end of
    the GPU activities launched inside it (``gpu_*``: its duration on the GPU)."""
    info = _info(invoke, path)
    ranges = step_ranges(path)
    kinds: dict[str, int] = {}
    for _, _, kind in ranges:
        kinds[kind] = kinds.get(kind, 0) + 1
    per_pid: dict[int, int] = {}
    for pid, _, _ in ranges:
        per_pid[pid] = per_pid.get(pid, 0) + 1
    distinct = {(step, kind) for _, step, kind in ranges}
    by_kind = {k: sum(1 for _, kind in distinct if kind == k) for k in sorted({k for _, k in distinct})}
    assert info["steps"] == {"total": len(ranges), "by_kind": dict(sorted(kinds.items())), "steps": len(distinct),
                             "steps_by_kind": by_kind, "ranks": len(per_pid),
                             "per_rank": [min(per_pid.values()), max(per_pid.values())]}
    result = invoke("query", path, "SELECT r.pid, s.step, s.step_kind, s.cpu_start_ns, s.cpu_end_ns, s.gpu_start_ns, "
                                   "s.gpu_end_ns FROM steps s JOIN ranks r USING (run_id, rank)", "--format", "json")
    assert result.exit_code == 0, result.stderr
    got = {(r["pid"], r["step"], r["step_kind"]): r for r in json.loads(result.stdout)}
    extents = step_gpu_extents(path)
    assert set(got) == set(ranges) == set(extents)
    for key, (start, end) in ranges.items():
        assert (got[key]["cpu_start_ns"], got[key]["cpu_end_ns"]) == (start, end), key
        assert (got[key]["gpu_start_ns"], got[key]["gpu_end_ns"]) == extents[key], key
