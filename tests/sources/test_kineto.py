"""torch.profiler (Kineto) traces: exact timestamps, ranks, every command, bad input."""

from __future__ import annotations

import gzip
import json
import shutil
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest

import traceql
from tests.oracle import rows
from tests.paths import H200, KINETO_TOY, sha256, shared_sqlite_files
from traceql.model.names import short_name


@pytest.fixture(scope="module")
def toy() -> Path:
    """The shared toy Kineto trace; a test using it needs the ``corpus`` marker."""
    return KINETO_TOY


def raw_events(path: Path) -> list[dict]:
    return json.loads(gzip.decompress(path.read_bytes()), parse_float=Decimal)["traceEvents"]


@pytest.mark.corpus
def test_timestamps_are_exact_nanoseconds(toy: Path) -> None:
    want = sorted(
        (int(e["ts"] * 1000), int((e["ts"] + e["dur"]) * 1000), e["name"])
        for e in raw_events(toy / "rank0.json.gz") if e.get("cat") == "kernel"
    )
    with traceql.read_trace(toy / "rank0.json.gz") as t:
        got = sorted(t.sql("SELECT start_ns, end_ns, name FROM kernels WHERE kind != 'sync'").iter_rows())
    assert got == want
    assert len(got) == 3435


@pytest.mark.corpus
def test_folder_is_one_run_with_ranks_from_distributed_info(invoke, toy: Path) -> None:
    info = json.loads(invoke("info", toy, "--format", "json").stdout)
    assert {r["run_id"] for r in info["runs"]} == {"toy_ddp2_cap25"}
    assert [(r["rank"], r["rank_from"], r["kernels"]) for r in info["ranks"]] == [
        (0, "distributedInfo", 3435), (1, "distributedInfo", 3428)]
    counts = {rank: sum(1 for e in raw_events(toy / f"rank{rank}.json.gz")
                        if e.get("cat") == "kernel" and "nccl" in e["name"].lower()) for rank in (0, 1)}
    assert info["kernels"]["by_kind"]["comm"] == counts[0] + counts[1] == 144
    assert info["gpus"][0]["name"] == "NVIDIA H200" and info["gpus"][0]["sm_count"] == 132
    assert info["collectives"][0]["collective"] == "AllReduce/RING/LL"


@pytest.mark.corpus
def test_every_command_reads_kineto(invoke, toy: Path, tmp_path: Path) -> None:
    q = invoke("query", toy, "SELECT rank, count(*) AS n FROM nvtx WHERE text LIKE 'ProfilerStep%' "
                            "AND domain = 'user_annotation' GROUP BY rank ORDER BY rank", "--format", "json")
    assert json.loads(q.stdout) == [{"rank": 0, "n": 5}, {"rank": 1, "n": 5}]
    out = tmp_path / "cases.parquet"
    d = invoke("detect", toy, "--out", out)
    assert d.exit_code == 0, d.stderr
    cases = pl.read_parquet(out)
    assert cases.height == 6719 and cases["is_slowdown"].sum() > 0


@pytest.mark.corpus
def test_launch_times_come_from_runtime_calls(toy: Path) -> None:
    with traceql.read_trace(toy / "rank0.json.gz") as t:
        n, launched, lag = t.sql("SELECT count(*), count(launch_ns), min(start_ns - launch_ns) FROM kernels").row(0)
    assert n == 3435 and launched == 2945 and lag > 0  # 490 kernels were launched before the profiler window


@pytest.mark.corpus
def test_short_names_equal_nsys_short_names() -> None:
    """Deriving the short name from a demangled name gives what nsys stores, for every kernel we have."""
    files = shared_sqlite_files()
    sql = ("SELECT DISTINCT d.value, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k "
           "JOIN StringIds d ON d.id = k.demangledName JOIN StringIds s ON s.id = k.shortName")
    pairs = {pair for f in files for pair in rows(f, sql)}
    assert len(pairs) > 100
    assert [(d, s) for d, s in pairs if short_name(d) != s] == []


def _write_gz(path: Path, data: bytes) -> Path:
    path.write_bytes(gzip.compress(data))
    return path


@pytest.mark.corpus
@pytest.mark.parametrize("case,code", [("truncated", 2), ("corrupt_gzip", 2), ("not_a_trace", 2), ("cpu_only", 3)])
def test_bad_kineto_input(invoke, toy: Path, tmp_path: Path, case: str, code: int) -> None:
    """Unreadable: exit 2; a trace without GPU activity (what every command needs): exit 3."""
    raw = gzip.decompress((toy / "rank0.json.gz").read_bytes())
    if case == "truncated":
        path, phrase = tmp_path / "rank0.json", "truncated JSON"
        path.write_bytes(raw[: len(raw) // 2])
    elif case == "corrupt_gzip":
        path, phrase = tmp_path / "rank0.json.gz", "corrupt gzip"
        data = (toy / "rank0.json.gz").read_bytes()
        path.write_bytes(data[: len(data) // 2])
    elif case == "not_a_trace":
        path, phrase = tmp_path / "config.json", "not a Chrome/Kineto trace"
        path.write_text(json.dumps({"world_size": 2, "cap_size": 25}))
    else:
        doc = json.loads(raw)
        doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") in ("cpu_op", "user_annotation")]
        path, phrase = _write_gz(tmp_path / "rank0.json.gz", json.dumps(doc).encode()), "no GPU activity"
    before = sha256(path)
    for command in (["info", path], ["detect", path], ["query", path, "SELECT 1"]):
        result = invoke(*command)
        assert result.exit_code == code, (command[0], result.stderr)
        assert result.stderr.count("\n") == 1 and str(path) in result.stderr and phrase in result.stderr, result.stderr
    assert sha256(path) == before


@pytest.mark.parametrize("text", ["-0.703", "-12.5", "-7", "-0.0005", "0.0004", "12.5", "4438525877947.739"])
def test_microseconds_become_nanoseconds_with_their_sign(tmp_path: Path, text: str) -> None:
    """A kernel's ts and dur (µs, as the JSON writes them) in ns, sign included: a dur of -0.703 µs is an end
    703 ns before the start, dropped as such (it was once read as +703 ns); oracle: Decimal, half away from 0."""
    from traceql.sources.kineto_file import ns_from_text as _ns

    want = int((Decimal(text) * 1000).quantize(Decimal(1), rounding="ROUND_HALF_UP"))
    assert pl.DataFrame({"t": [text]}).select(_ns("t")).item() == want


@pytest.mark.corpus
def test_two_files_claiming_one_rank(invoke, toy: Path, tmp_path: Path) -> None:
    a, b = tmp_path / "a.json.gz", tmp_path / "b.json.gz"
    shutil.copyfile(toy / "rank0.json.gz", a)
    shutil.copyfile(toy / "rank0.json.gz", b)
    result = invoke("info", a, b)
    assert result.exit_code == 2
    assert f"{b}: claims rank 0, as {a} does" in result.stderr


def test_embedded_torch_collection() -> None:
    """Our own torch.profiler collection (GPT-2, 2 × H200): exact times, both ranks, NCCL kernels found."""
    from tests.paths import RUNS

    run = RUNS / "gpt2-torch"
    f = run / "traces" / "gpt2-torch_rank1.json.gz"
    want = sorted(int(e["ts"] * 1000) for e in raw_events(f) if e.get("cat") == "kernel")
    with traceql.read_trace(run) as t:
        got = t.sql("SELECT start_ns FROM kernels WHERE rank = 1 AND kind != 'sync' ORDER BY start_ns")
        comm = t.sql("SELECT rank, count(*) FROM kernels WHERE kind = 'comm' GROUP BY rank ORDER BY rank").rows()
    assert got["start_ns"].to_list() == want
    assert [r for r, _ in comm] == [0, 1] and all(n > 0 for _, n in comm)


@pytest.mark.corpus
def test_kernel_keys_are_the_same_for_both_demanglers(toy: Path) -> None:
    """The toy DDP run under torch.profiler and under nsys: two demanglers spell the same 48 kernels
    differently, and their keys are the same 48; no export's keys merge two distinct names."""
    from traceql.model.names import with_keys

    def keys(path: Path) -> tuple[set[str], int]:
        with traceql.read_trace(path) as t:
            k = with_keys(t.kernels.filter(pl.col("kind") == "compute"))
        return set(k["key"]), k.select("name", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z").n_unique()

    kineto, kineto_names = keys(toy)
    nsys, nsys_names = keys(H200 / "nsys" / "toy_ddp2_cap25.sqlite")
    assert kineto == nsys and len(kineto) == kineto_names == nsys_names == 48
    for f in shared_sqlite_files():
        found, names = keys(f)
        assert len(found) == names, f
