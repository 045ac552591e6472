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
from tests.paths import H200, PUBLIC, RUNS, corpus, sha256, shared_sqlite_files
from traceql.model.names import short_name

TOY = H200 / "kineto" / "toy_ddp2_cap25"


@pytest.fixture(scope="module")
def toy() -> Path:
    """The shared toy Kineto trace; a test using it needs the ``corpus`` marker."""
    return TOY


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
@pytest.mark.parametrize("case", ["truncated", "corrupt_gzip", "not_a_trace", "cpu_only"])
def test_bad_kineto_input(invoke, toy: Path, tmp_path: Path, case: str) -> None:
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
        assert result.exit_code not in (0, None)
        assert result.stderr.count("\n") == 1 and str(path) in result.stderr and phrase in result.stderr, result.stderr
        assert "Traceback" not in result.output
    assert sha256(path) == before


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


# --- the compiled reader reads exactly what the streaming reader reads ----------------------------------------

TABLES = ("kernels", "memcpy", "nvtx", "runs", "ranks", "gpus")
KINETO_CORPUS = sorted(PUBLIC.glob("hta-kineto/**/*.json.gz")) + sorted(TOY.glob("*.json.gz"))


def model(path: Path, monkeypatch: pytest.MonkeyPatch, *, compiled: bool) -> dict[str, list] | str:
    """The model tables a Kineto file or folder gives, in insertion order, or the error line it gives."""
    from traceql.model import engine
    from traceql.sources import inputs, kineto

    with monkeypatch.context() as m:
        if not compiled:
            m.setattr(kineto, "decode", lambda _path: None)
        con = engine.connect()
        engine.create_relations(con)
        try:
            kineto.load(con, inputs.resolve([path]))
        except traceql.TraceqlError as exc:
            return f"{type(exc).__name__}: {exc}"
        return {t: con.sql(f"SELECT * FROM {t}").fetchall() for t in TABLES}


def assert_same_model(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    compiled, streamed = model(path, monkeypatch, compiled=True), model(path, monkeypatch, compiled=False)
    assert compiled == streamed


@pytest.mark.parametrize("path", [RUNS / "gpt2-torch" / "traces", *(corpus(p, id=p.name) for p in KINETO_CORPUS)],
                         ids=str)
def test_compiled_reader_gives_the_streamed_model(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Real traces: the same tables, row for row, and the compiled reader read each file itself."""
    from traceql.sources.kineto_decode import decode

    assert_same_model(path, monkeypatch)
    for f in [path] if path.is_file() else sorted(path.glob("*.json*")):
        assert decode(f) is not None, f


class Num(str):
    """A JSON number written as this exact text."""


def dumps(value: object) -> str:
    if isinstance(value, Num):
        return str(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k)}:{dumps(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(dumps(v) for v in value) + "]"
    return json.dumps(value)


def odd_values():
    from hypothesis import strategies as st

    numbers = st.sampled_from(["4477824349742.263", "12", "-0", "-3.5", "1e3", "1.5E2", "0.0004", "12.34567",
                               "9223372036854775807", "9223372036854775808", "-9223372036854775809",
                               "100000000000000000000000", "1e300"]).map(Num)
    return st.one_of(numbers, st.integers(-(2**70), 2**70), st.none(), st.booleans(),
                     st.sampled_from(["soon", "12.5", "", "é\n\"x\"", "gpu0"]), st.lists(st.integers(0, 9), max_size=4))


def kineto_events(*, odd: bool):
    """Lists of events: with ``odd``, of any shape and type; without, of the types the compiled reader reads
    itself (any value where the model keeps the text, integers where it keeps integers)."""
    from hypothesis import strategies as st

    cats = st.sampled_from(["kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "memset", "cuda_sync",
                            "user_annotation", "GPU_User_Annotation", "cuda_runtime", "Runtime", "cuda_driver",
                            "cpu_op", "CPU_OP", "python_function", "Trace", "other"])
    values = odd_values()
    ints = st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(0, 300), st.none())
    shapes = st.one_of(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=4), st.none())
    arg_values = st.one_of(values, st.lists(values, max_size=4)) if odd else ints
    arg_keys = st.sampled_from(["device", "stream", "correlation", "bytes", "registers per thread", "shared memory"])
    args = st.fixed_dictionaries({}, optional={
        **{k: arg_values for k in ("device", "stream", "correlation", "bytes", "registers per thread",
                                   "shared memory")}, "grid": arg_values if odd else shapes,
        "block": arg_values if odd else shapes, "other": values})
    if odd:
        args = st.one_of(args, st.dictionaries(arg_keys, values, max_size=3), values)
    else:
        args = st.one_of(args, args, st.none())
    text = st.one_of(st.text(max_size=30), st.none())
    event = st.fixed_dictionaries({"ph": st.sampled_from(["X", "X", "X", "i", "s", "f", "M"])}, optional={
        "cat": st.one_of(cats, cats, st.none(), *[values] * odd), "name": st.one_of(text, *[values] * odd),
        "ts": values, "dur": values, "pid": values, "args": args})
    if odd:
        event = st.one_of(event, event, st.fixed_dictionaries({}, optional={"ph": st.sampled_from(["X", "Q", 7]),
                                                                          "cat": cats, "args": args}), values)
    return st.lists(event, max_size=25)


@pytest.mark.parametrize("odd", [False, True], ids=["plausible", "odd"])
def test_compiled_reader_reads_any_events_as_the_streaming_reader(odd: bool, tmp_path_factory: pytest.TempPathFactory,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Events of every shape and type: the same tables or the same error line, whichever reader reads them.
    The compiled reader reads the plausible ones itself, and hands what it cannot read exactly to the other."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from traceql.sources.kineto_decode import decode

    gpu = {"ph": "X", "cat": "kernel", "name": "k", "ts": Num("5.5"), "dur": Num("1.25"), "pid": 1,
           "args": {"device": 0, "stream": 7, "correlation": 3, "grid": [1, 2, 3], "block": [4, 1, 1]}}

    @settings(max_examples=50, deadline=None)
    @given(events=kineto_events(odd=odd), with_gpu=st.booleans(),
           info=st.sampled_from([None, {"rank": 0}, "{'rank': 1}"]))
    def check(events: list, with_gpu: bool, info: object) -> None:
        path = tmp_path_factory.mktemp("events") / "rank0.json"
        top = {"schemaVersion": 1, **({"distributedInfo": info} if info else {})}
        path.write_text(dumps({**top, "traceEvents": events + [gpu] * with_gpu}))
        assert odd or decode(path) is not None
        assert_same_model(path, monkeypatch)

    check()


GPU_EVENT = ('{"ph":"X","cat":"kernel","name":"k","ts":5.5,"dur":1.25,'
             '"args":{"device":0,"stream":7,"correlation":3,"grid":[1,2,3],"block":[4,1,1]}}')


@pytest.mark.parametrize("text", [
    f'{{"traceEvents":[{GPU_EVENT}],"x":1,"traceEvents":[{GPU_EVENT.replace("5.5", "9.5")}]}}',
    f'{{"distributedInfo":{{"traceEvents":1}},"traceEvents":[{GPU_EVENT}]}}',
    f'{{"traceEvents":[{GPU_EVENT},{{"ph":"X","cat":"kernel","ts":NaN}}]}}',
    f'{{"traceEvents":[{GPU_EVENT},5,"x",{{"ph":"X","ph":"i"}}]}} trailing',
    f'{{"traceEvents":[{GPU_EVENT},{{"ph":"X","cat":"Kernel","name":"a\\ud800","ts":1}}]}}',
    f'{{"traceEvents":[{GPU_EVENT}]',
    f'\ufeff{{"traceEvents":[{GPU_EVENT}]}}',
], ids=["repeated key", "key in a value", "NaN", "odd events, trailing text", "lone surrogate", "truncated", "BOM"])
def test_documents_the_compiled_reader_hands_over(text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What strict JSON or the compiled reader's types do not allow: read by the streaming reader, as before."""
    from traceql.sources.kineto_decode import decode

    path = tmp_path / "rank0.json"
    path.write_text(text)
    assert decode(path) is None
    assert_same_model(path, monkeypatch)
