"""`traceql profile` end to end on CPU (gloo): the memory search bounded by a memory limit, compute times,
DDP buckets from real runs (recorded by the ranks; all-reduce times from GPU traces), merging folders."""

from __future__ import annotations

import json
import shutil
import statistics
from collections import defaultdict
from pathlib import Path

import pytest

from tests.oracle import nsys_steps, rows
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


RECORDER = """

_forward = forward_pass


def forward_pass(model, inputs):
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "calls.txt"), "a") as f:
        f.write(f"{inputs[0].shape[0]}\\n")
    return _forward(model, inputs)
"""


def recording(tmp_path: Path) -> Path:
    """A copy of the tiny model whose forward_pass appends the batch of each call to calls.txt beside it."""
    model = Path(shutil.copytree(TINY, tmp_path / "model" / "tiny", ignore=shutil.ignore_patterns("__pycache__")))
    with (model / "define_model.py").open("a") as f:
        f.write(RECORDER)
    return model


def test_compute_runs_the_batches_warmup_and_iterations_asked(invoke, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """``--batches 16,256,2048 --warmup 2 --iterations 5``: the model ran 2 + 5 steps at each batch, in that
    order (the forward passes it recorded), and the profile has exactly those batches, each of 5 iterations.
    Each step of a batch 16 times larger does 16 times the arithmetic: its forward and backward take longer.
    One thread, as torchrun gives each rank of a collection: several, on a CPU shared with other work, spend
    more time waiting for each other than computing (tens of ms for the tiny model's smallest step)."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the profiling process inherits it
    model = recording(tmp_path)
    result = invoke("profile", "compute", model, "--out", tmp_path / "p", "--batches", "16,256,2048",
                    "--warmup", "2", "--iterations", "5")
    assert result.exit_code == 0, result.stderr
    calls = [int(x) for x in (model / "calls.txt").read_text().split()]
    assert calls == [16] * 7 + [256] * 7 + [2048] * 7
    data = load(tmp_path / "p" / "compute-cpu.json")
    assert [(r["batch"], r["iterations"]) for r in data["batches"]] == [(16, 5), (256, 5), (2048, 5)]
    for phase in ("forward_ms", "backward_ms"):
        times = [r[phase] for r in data["batches"]]
        assert times == sorted(times) and len(set(times)) == 3, (phase, times)


@pytest.mark.parametrize("cap,tried", [(8, [1, 2, 4, 8]), (12, [1, 2, 4, 8, 12])])
def test_memory_max_batch_bounds_the_search(invoke, tiny_profiles: Path, tmp_path: Path, cap: int,
                                            tried: list[int]) -> None:
    """Under the same limit, the search without --max-batch goes past 12 samples (tiny_profiles); with
    ``--max-batch 8`` it tries 1, 2, 4 and 8 only (the forward passes the model recorded: batch 1 first, to
    make the gradients and optimizer state) and reports 8; a cap that is no power of two is tried itself."""
    free = load(tiny_profiles / "memory-cpu.json")
    assert free["max_batch"] > 12
    model = recording(tmp_path)
    result = invoke("profile", "memory", model, "--out", tmp_path / "p", "--memory-limit", str(LIMIT),
                    "--max-batch", str(cap))
    assert result.exit_code == 0, result.stderr
    data = load(tmp_path / "p" / "memory-cpu.json")
    assert data["max_batch"] == cap and [(r["batch"], r["fits"]) for r in data["batches"]] == [
        (b, True) for b in tried]
    assert [int(x) for x in (model / "calls.txt").read_text().split()] == [1, *tried]
    assert f"largest batch that fits: {cap}" in result.stdout


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
    # torch sees no GPU: a usage error found before the model runs, exit 2 (not 6, "it ran and failed")
    assert cpu.exit_code == 2 and "pass one, e.g. --memory-limit 4GB" in cpu.stderr, cpu.stderr
    assert cpu.stderr.count("\n") == 1 and not (tmp_path / "none").exists()  # no folder was made for it


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
    recorded = json.loads((runs[0] / "results" / "rank0.json").read_text())
    assert sum(recorded["param_bytes"]) == 4 * TINY_PARAMS and 2**20 in recorded["param_bytes"]  # the 512 x 512
    assert data["comm_model"] is None and all(c["allreduce_ms"] == [] for c in caps.values())
    assert "no trace" in result.stdout and result.stderr == ""


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


def test_buckets_interconnect_names_the_link(invoke, tmp_path: Path) -> None:
    """Without --interconnect, the runs' ranks all on one host (their results' ``host``) give ``intra-node``;
    ``--interconnect`` names it instead, whatever the hosts."""
    runs = [RUNS / "gpt2-b16-cap2-none", RUNS / "gpt2-b16-cap25-none"]
    hosts = {json.loads(p.read_text())["host"] for run in runs for p in (run / "results").glob("rank*.json")}
    assert len(hosts) == 1
    for args, want in (((), "intra-node"), (("--interconnect", "nvlink4"), "nvlink4")):
        out = tmp_path / want
        result = invoke("profile", "buckets", *runs, "--out", out, *args)
        assert result.exit_code == 0, result.stderr
        [path] = out.glob("buckets-*.json")
        assert load(path)["interconnect"] == want


def test_bucket_all_reduce_times_are_the_nccl_kernels_of_the_last_rank(invoke, tmp_path: Path) -> None:
    """GPT-2 on 2 x H200, batch 16, cap 25 MB: the all-reduce time ``profile buckets`` gives bucket k is the
    median over the normal steps of the k-th NCCL AllReduce kernel's duration on the rank that came to it last.

    That rank waited for nobody: its kernel is the shorter of the two (the other's also holds its wait), so the
    oracle (sqlite3, each rank's ncclDevKernel_AllReduce kernels of each step_<i> range in launch order) takes
    the shorter duration. Which rank came last is judged on the ranks' clocks brought together, whose ends of
    one all-reduce agree within a few microseconds, not exactly: where the two kernels' durations lie within
    CLOCK_NS of each other, either may be the last one's, and the figure lies between the medians of the two
    choices. Every bucket also moves its bytes no faster than NVLink 4 can (450 GB/s a direction: a 2-rank ring
    all-reduce sends each rank's whole bucket once)."""
    clock_ns = 10_000
    run = RUNS / "gpt2-b16-cap25-nsys"
    result = invoke("profile", "buckets", run, "--out", tmp_path / "p")
    assert result.exit_code == 0, result.stderr
    [entry] = load(tmp_path / "p" / "buckets-nvidia-h200.json")["caps"]
    durations: dict[tuple[int, int], list[int]] = defaultdict(list)  # (step, k) -> each rank's duration
    for path in sorted((run / "traces").glob("*.sqlite")):
        steps = nsys_steps(path)
        by_step: dict[int, list[int]] = defaultdict(list)
        for pid, corr, start, end in rows(path, """
                SELECT (k.globalPid >> 24) & 16777215, k.correlationId, k.start, k."end"
                FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName
                WHERE s.value LIKE 'ncclDevKernel_AllReduce%' ORDER BY k.start"""):
            step = steps.get((pid, corr))
            if step is not None and step[1] == "sync":
                by_step[step[0]].append(end - start)
        assert len({len(v) for v in by_step.values()}) == 1  # as many all-reduces in every step
        for step, ds in by_step.items():
            for k, d in enumerate(ds):
                durations[(step, k)].append(d)
    buckets = 1 + max(k for _, k in durations)
    steps = sorted({s for s, _ in durations})
    assert entry["buckets"] == len(entry["allreduce_ms"]) == len(entry["bucket_bytes"]) == buckets
    exact = 0
    for k in range(buckets):
        pairs = [sorted(durations[(s, k)]) for s in steps]
        assert all(len(p) == 2 for p in pairs)
        low = statistics.median(p[0] for p in pairs)
        high = statistics.median(p[1] if p[1] - p[0] <= clock_ns else p[0] for p in pairs)
        got = entry["allreduce_ms"][k]
        assert round(low / 1e6, 4) <= got <= round(high / 1e6, 4), (k, low, high, got)
        exact += low == high
        assert entry["bucket_bytes"][k] / (got / 1e3) <= 450e9, k
    assert exact > buckets // 2  # most buckets are clear-cut: the figure is the shorter kernel's, exactly


def test_merge_keeps_the_first_of_two_and_refuses_what_is_not_a_profile(invoke, tiny_profiles: Path,
                                                                       tmp_path: Path) -> None:
    other = Path(shutil.copytree(tiny_profiles, tmp_path / "node2"))  # a second node's folder, the same GPU
    result = invoke("profile", "merge", tiny_profiles, other, "--out", tmp_path / "m")
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == ["compute-cpu.json", "memory-cpu.json"]
    assert result.stderr == "" and result.stdout.count("already given by") == 2
    twice = invoke("profile", "merge", tiny_profiles, tiny_profiles, "--out", tmp_path / "m3")
    assert twice.exit_code == 2 and twice.stderr == f"error: {tiny_profiles}: given twice\n"
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "x.json").write_text('{"format": "something else"}')
    bad = invoke("profile", "merge", tmp_path / "bad", "--out", tmp_path / "m2")
    assert bad.exit_code == 2 and bad.stderr.count("\n") == 1 and "not a traceql profile" in bad.stderr
