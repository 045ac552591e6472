"""`traceql export perfetto` as a user runs it: a Chrome trace JSON whose events are the trace's kernels, memory
operations and steps, checked against sqlite3 counts and detect's cases; bad output paths refused."""

from __future__ import annotations

import gzip
import json
import os
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.oracle import count, read_kernels
from tests.paths import DDP_FILES, DDP_TRACE, SINGLE_TRACE
from traceql.commands.detect import detect
from traceql.commands.export import perfetto

KERNEL_CATS = {"compute", "comm", "sync", "slowdown"}
MEMORY_CATS = {"memcpy", "memset"}
REQUIRED = {"X": {"ph", "name", "pid", "tid", "ts", "dur"}, "M": {"ph", "name", "pid"}}


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, object]:
    """The embedded example exported once against its isolated run: (path, raw text, CLI result). The CLI runs
    in-process as the ``invoke`` fixture runs it (module-scoped, so the trace is read once for these tests)."""
    from traceql.cli import app

    path = tmp_path_factory.mktemp("perfetto") / "trace.json"
    result = CliRunner().invoke(app, ["export", "perfetto", str(DDP_TRACE), "--baseline", str(SINGLE_TRACE),
                                      "-o", str(path)], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    return path, path.read_text(), result


def _events(text: str, **kw: object) -> list[dict]:
    return json.loads(text, **kw)["traceEvents"]


def _cats(events: list[dict]) -> Counter[str]:
    return Counter(e["cat"] for e in events if e["ph"] == "X")


def test_one_event_per_kernel_memory_operation_and_case(exported) -> None:
    path, text, result = exported
    data = json.loads(text)
    assert data["displayTimeUnit"] == "ns" and data["otherData"]["label_source"] == "baseline"
    cats = _cats(data["traceEvents"])
    kernels = count(DDP_TRACE, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")
    memory = (count(DDP_TRACE, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY")
              + count(DDP_TRACE, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMSET"))
    assert sum(cats[c] for c in KERNEL_CATS) == kernels
    assert sum(cats[c] for c in MEMORY_CATS) == memory
    cases = int(detect(DDP_TRACE, baseline=[SINGLE_TRACE]).kernels["is_slowdown"].sum())
    assert cats["slowdown"] == cases == data["otherData"]["cases"] > 0
    total = len(data["traceEvents"])
    assert result.stderr == "" and result.stdout == f"wrote {total:,} events ({cases:,} slowdown cases) to {path}\n"


def test_cases_and_comm_are_marked(exported) -> None:
    events = [e for e in _events(exported[1]) if e["ph"] == "X"]
    for e in events:
        if e["cat"] == "slowdown":
            assert e["cname"] == "terrible" and e["args"]["is_slowdown"] is True
            assert e["args"]["slowdown_ratio"] > 1.2 and e["args"]["baseline_ns"] > 0
            assert e["args"]["concurrent_comm"] and e["args"]["comm_overlap_ns"] > 0
        elif e["cat"] == "compute":
            assert "cname" not in e and e["args"]["is_slowdown"] is False
        elif e["cat"] == "comm":
            assert e["cname"] == "thread_state_iowait" and e["name"].startswith("nccl")
    compute = next(e for e in events if e["cat"] == "compute")
    assert {"demangled", "grid", "block", "correlation_id", "step", "step_kind", "comm_overlap_ns",
            "concurrent_comm", "baseline_ns", "baseline_kind", "slowdown_ratio"} <= set(compute["args"])


def test_every_event_has_the_fields_of_its_phase(exported) -> None:
    events = _events(exported[1])
    assert {e["ph"] for e in events} == {"X", "M"}
    for e in events:
        assert REQUIRED[e["ph"]] <= set(e), e
        assert isinstance(e["pid"], int)
        if e["ph"] == "X":
            assert isinstance(e["tid"], int) and e["dur"] >= 0 and e["ts"] >= 0
        else:
            assert isinstance(e["args"]["name" if e["name"].endswith("_name") else "sort_index"], (str, int))


def test_times_are_the_exact_nanoseconds(exported) -> None:
    events = _events(exported[1], parse_float=Decimal)
    rank0 = next(e["pid"] for e in events if e["name"] == "process_name" and e["args"]["name"].endswith("rank 0"))
    got = {(e["args"]["correlation_id"], e["ts"] * 1000, (e["ts"] + e["dur"]) * 1000)
           for e in events if e["ph"] == "X" and e["pid"] == rank0 and e["cat"] in KERNEL_CATS}
    want = {(k["corr"], k["start"], k["end"]) for k in read_kernels(DDP_FILES[0], keyed=True)}
    assert got == want and len(want) > 1000
    assert all(ts == int(ts) for _, ts, _ in got)  # three decimals: no nanosecond lost


def test_a_process_per_rank_a_thread_per_stream_and_steps(exported) -> None:
    events = _events(exported[1])
    procs = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert sorted(procs.values()) == ["gpt2-nsys rank 0", "gpt2-nsys rank 1"]
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    used = {(e["pid"], e["tid"]) for e in events if e["ph"] == "X"}
    assert used == set(threads)
    for pid in procs:
        steps = [e for e in events if e["ph"] == "X" and e["pid"] == pid and e["cat"] == "step"]
        assert [s["name"] for s in steps] == [f"step {i}" for i in range(1, 6)]
        assert {threads[(pid, s["tid"])] for s in steps} == {"steps"}
        for s in steps:  # the step spans the GPU work it launched
            work = [e for e in events if e["ph"] == "X" and e["pid"] == pid and e["cat"] != "step"
                    and e["args"]["step"] == s["args"]["step"]]
            assert min(e["ts"] for e in work) == s["ts"]
            assert max(e["ts"] + e["dur"] for e in work) == pytest.approx(s["ts"] + s["dur"], abs=1e-6)
    streams = {name for name in threads.values() if name != "steps"}
    assert streams == {f"stream {k}" for k in {e["tid"] for e in events if e["ph"] == "X" and e["cat"] != "step"}}


def test_the_file_has_the_users_mode(exported) -> None:
    mask = os.umask(0)
    os.umask(mask)
    assert exported[0].stat().st_mode & 0o777 == 0o666 & ~mask


def test_gzip_and_the_python_api(tmp_path: Path) -> None:
    out = tmp_path / "single.json.gz"
    result = perfetto(SINGLE_TRACE, output=out)
    events = _events(gzip.decompress(out.read_bytes()).decode())
    cats = _cats(events)
    assert result.path == out and result.cases == 0 and result.mode == "detector"
    assert result.events == {**cats, "metadata": sum(e["ph"] == "M" for e in events)}
    assert result.total == len(events)
    assert cats["compute"] == count(SINGLE_TRACE, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")
    assert "comm" not in cats and "slowdown" not in cats
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]


def test_an_output_that_is_not_json_is_refused(invoke, tmp_path: Path) -> None:
    out = tmp_path / "trace.txt"
    result = invoke("export", "perfetto", DDP_TRACE, "-o", out)
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and str(out) in result.stderr and ".json" in result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("where", ["directory", "missing parent"])
def test_an_output_that_cannot_be_a_file_is_refused(invoke, tmp_path: Path, where: str) -> None:
    out = tmp_path / "trace.json"
    if where == "directory":
        out.mkdir()
    else:
        out = tmp_path / "nowhere" / "trace.json"
    result = invoke("export", "perfetto", SINGLE_TRACE, "-o", out)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")
    assert ("is a directory" if where == "directory" else "does not exist") in result.stderr
    assert [p.name for p in tmp_path.iterdir()] == (["trace.json"] if where == "directory" else [])


def test_a_missing_trace_is_named(invoke, tmp_path: Path) -> None:
    missing = tmp_path / "nope.sqlite"
    result = invoke("export", "perfetto", missing, "-o", tmp_path / "trace.json")
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and str(missing) in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_output_is_required(invoke) -> None:
    result = invoke("export", "perfetto", DDP_TRACE)
    assert result.exit_code == 2 and "--output" in result.output
