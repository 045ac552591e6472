"""`traceql profile` end to end on CPU (gloo): the memory search bounded by a memory limit, compute times,
DDP buckets from real runs (recorded by the ranks; all-reduce times from GPU traces), merging folders."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.paths import INRUN_TRACE, RUNS, TINY
from traceql.collectors.profile_format import validate

# the tiny MLP: 64 -> 512 -> 512 -> 10, fp32; SGD without momentum keeps no state
TINY_PARAMS = (64 * 512 + 512) + (512 * 512 + 512) + (512 * 10 + 10)
LIMIT = 4_000_000


def load(path: Path) -> dict:
    return validate(json.loads(path.read_text()), str(path))


@pytest.fixture(scope="module")
def tiny_profiles(tmp_path_factory) -> Path:
    from traceql.commands.profile import compute, memory

    out = tmp_path_factory.mktemp("profiles")
    memory(TINY, out, memory_limit=LIMIT)
    compute(TINY, out, iterations=3, warmup=1)
    return out


def test_memory_search_finds_the_largest_batch_under_the_limit(tiny_profiles: Path) -> None:
    data = load(tiny_profiles / "memory-cpu.json")
    assert data["gpu"] == "cpu" and data["limit_bytes"] == LIMIT and data["model"] == "tiny"
    assert data["static_bytes"] == 2 * 4 * TINY_PARAMS  # weights and gradients, fp32
    rows = {r["batch"]: r for r in data["batches"]}
    best = data["max_batch"]
    assert rows[best]["fits"] and not rows[best + 1]["fits"]  # the bisection closed in on the edge
    assert all(r["fits"] == (r["peak_bytes"] is not None and r["peak_bytes"] <= LIMIT) for r in rows.values())
    peaks = [rows[b]["peak_bytes"] for b in sorted(rows) if rows[b]["fits"]]
    assert peaks == sorted(peaks) and peaks[0] > data["static_bytes"]
    for r in rows.values():
        want = (LIMIT - data["static_bytes"]) // (r["peak_bytes"] - data["static_bytes"]) if r["fits"] else 0
        assert r["virtual_workers"] == want


def test_compute_times_the_batches_that_fit(tiny_profiles: Path) -> None:
    memory = load(tiny_profiles / "memory-cpu.json")
    data = load(tiny_profiles / "compute-cpu.json")
    batches = [r["batch"] for r in data["batches"]]
    fitting = [r["batch"] for r in memory["batches"] if r["fits"]]
    assert batches == sorted({b for b in fitting if b & (b - 1) == 0} | {memory["max_batch"]})
    assert all(r["iterations"] == 3 and min(r["forward_ms"], r["backward_ms"], r["optimizer_ms"]) > 0
               for r in data["batches"])


def test_cli_prints_the_profile_and_refuses_bad_options(invoke, tmp_path: Path) -> None:
    model = tmp_path / "model" / "tiny"
    shutil.copytree(TINY, model, ignore=shutil.ignore_patterns("__pycache__"))
    result = invoke("profile", "memory", model, "--out", tmp_path, "--memory-limit", "3.6MB")
    assert result.exit_code == 0, result.stderr
    assert not (model / "__pycache__").exists()  # importing define_model.py wrote no bytecode beside it
    data = load(tmp_path / "memory-cpu.json")
    assert data["limit_bytes"] == 3_600_000
    assert f"largest batch that fits: {data['max_batch']}" in result.stdout
    bad = invoke("profile", "memory", TINY, "--out", tmp_path, "--memory-limit", "lots")
    assert bad.exit_code == 2 and bad.stderr.count("\n") == 1 and "a size such as 4GB" in bad.stderr
    missing = invoke("profile", "compute", tmp_path / "nowhere", "--out", tmp_path)
    assert missing.exit_code == 2 and missing.stderr.count("\n") == 1 and "no such input folder" in missing.stderr
    cpu = invoke("profile", "memory", TINY, "--out", tmp_path / "none")
    assert cpu.exit_code != 0 and "needs --memory-limit" in cpu.stderr
    assert not (tmp_path / "none").exists()  # the folder made for it is gone with the failure


def test_the_all_reduce_line_is_never_negative() -> None:
    """A free least-squares fit below 0 (here latency −0.87 ms) is refitted with that term held at 0."""
    from traceql.commands.profile import _line

    mb = 2**20
    line, notes = _line([(1 * mb, 0.1), (2 * mb, 1.0), (3 * mb, 2.0)])
    assert line == {"latency_ms": 0.0, "ms_per_mb": round(8.1 / 14, 5), "samples": 3} and "refitted" in notes[0]
    line, notes = _line([(1 * mb, 1.0), (2 * mb, 1.5)])
    assert line == {"latency_ms": 0.5, "ms_per_mb": 0.5, "samples": 2} and not notes


def test_buckets_from_runs_the_ranks_recorded(invoke, tmp_path: Path) -> None:
    """Two CPU collections of the tiny model at bucket caps 1 and 0.05 MB: the buckets are DDP's own, their
    bytes adding up to every gradient's: two at either cap, since DDP's first bucket takes 1 MiB whatever the
    cap (the 1 MiB 512 x 512 weight with what follows it) and the rest is smaller than either; no GPU trace, so
    no all-reduce times."""
    runs = []
    for cap in ("1", "0.05"):
        run = tmp_path / f"tiny-cap{cap}"
        done = invoke("collect", TINY, "--profiler", "none", "--out", run, "--set", f"cap_size={cap}")
        assert done.exit_code == 0, done.stderr
        runs.append(run)
    result = invoke("profile", "buckets", *runs, "--out", tmp_path / "p")
    assert result.exit_code == 0, result.stderr
    data = load(tmp_path / "p" / "buckets-cpu.json")
    caps = {c["cap_mb"]: c for c in data["caps"]}
    assert sorted(caps) == [0.05, 1]
    assert all(sum(c["bucket_bytes"]) == 4 * TINY_PARAMS for c in caps.values())
    assert caps[0.05]["buckets"] == caps[1]["buckets"] == 2
    assert caps[1]["bucket_bytes"][0] >= 2**20 > caps[1]["bucket_bytes"][1]
    assert data["comm_model"] is None and all(c["allreduce_ms"] == [] for c in caps.values())
    assert "no trace" in result.stderr


def test_buckets_from_gpu_traces(tmp_path: Path) -> None:
    """GPT-2 on 2 x H200 at batch 16, bucket cap 25 MB: its ranks recorded 13 DDP buckets and each step
    runs 13 all-reduces, paired in order; the in-run collection at batch 8 predates the recording."""
    from traceql.commands.profile import buckets

    path, notes = buckets([RUNS / "gpt2-b16-cap25-nsys", INRUN_TRACE], tmp_path)
    data = load(path)
    assert data["gpu"] == "NVIDIA H200" and data["world_size"] == 2 and data["interconnect"] == "intra-node"
    by_batch = {c["batch"]: c for c in data["caps"]}
    new, old = by_batch[16], by_batch[8]
    results = json.loads((RUNS / "gpt2-b16-cap25-nsys" / "results" / "rank0.json").read_text())
    assert new["bucket_bytes"] == results["ddp_buckets"] and new["buckets"] == len(new["allreduce_ms"]) == 13
    assert old["bucket_bytes"] == [] and len(old["allreduce_ms"]) == 13 and "recorded no DDP buckets" in notes[0]
    assert 0 < new["exposed_comm_ms"] < new["step_ms"] and new["overlap_tax_ms"] >= 0
    assert data["comm_model"]["samples"] == 13


def test_merge_keeps_the_first_of_two_and_refuses_what_is_not_a_profile(invoke, tiny_profiles: Path,
                                                                       tmp_path: Path) -> None:
    other = Path(shutil.copytree(tiny_profiles, tmp_path / "node2"))  # a second node's folder, the same GPU
    result = invoke("profile", "merge", tiny_profiles, other, "--out", tmp_path / "m")
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == ["compute-cpu.json", "memory-cpu.json"]
    assert result.stderr.count("already given by") == 2
    twice = invoke("profile", "merge", tiny_profiles, tiny_profiles, "--out", tmp_path / "m3")
    assert twice.exit_code == 2 and twice.stderr == f"error: {tiny_profiles}: given twice\n"
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "x.json").write_text('{"format": "something else"}')
    bad = invoke("profile", "merge", tmp_path / "bad", "--out", tmp_path / "m2")
    assert bad.exit_code == 2 and bad.stderr.count("\n") == 1 and "not a traceql profile" in bad.stderr
