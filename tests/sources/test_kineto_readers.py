"""The compiled Kineto reader reads exactly what the event-by-event reader reads: the same model, row for
row, on real traces and on generated events of every shape, and it hands over what it cannot read exactly."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import traceql
from tests.paths import KINETO_TOY, PUBLIC, RUNS, corpus

TABLES = ("kernels", "memcpy", "nvtx", "runs", "ranks", "gpus")
KINETO_CORPUS = sorted(PUBLIC.glob("hta-kineto/**/*.json.gz")) + sorted(KINETO_TOY.glob("*.json.gz"))


def model(path: Path, monkeypatch: pytest.MonkeyPatch, *, compiled: bool) -> dict[str, list] | str:
    """The model's relations a Kineto file or folder gives, in insertion order, or the error line it gives."""
    from traceql.model import engine, schema
    from traceql.sources import inputs, kineto, kineto_file

    with monkeypatch.context() as m:
        if not compiled:
            m.setattr(kineto_file, "decode", lambda _path: None)
        con = engine.connect()
        engine.create_relations(con)
        staged = engine.Model(con)
        try:
            kineto.load(staged, inputs.resolve([path]))
        except traceql.TraceqlError as exc:
            return f"{type(exc).__name__}: {exc}"
        rows = {t: [r for f in staged.staged[t] for r in f.cast({c: pl.String for c in f.columns}).rows()]
                for t in schema.ACTIVITIES}
        return {t: rows[t] if t in rows else con.sql(f"SELECT * FROM {t}").fetchall() for t in TABLES}


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
    from hypothesis import example, given, settings
    from hypothesis import strategies as st

    from traceql.sources.kineto_decode import decode

    gpu = {"ph": "X", "cat": "kernel", "name": "k", "ts": Num("5.5"), "dur": Num("1.25"), "pid": 1,
           "args": {"device": 0, "stream": 7, "correlation": 3, "grid": [1, 2, 3], "block": [4, 1, 1]}}

    @settings(max_examples=50, deadline=None)
    @given(events=kineto_events(odd=odd), with_gpu=st.booleans(),
           info=st.sampled_from([None, {"rank": 0}, "{'rank': 1}"]))
    @example(events=[{"ph": "X", "cat": "cpu_op", "pid": Num("9223372036854775808")}], with_gpu=True, info=None)
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
], ids=["repeated key", "key in a value", "NaN", "odd events, trailing text", "lone surrogate", "truncated"])
def test_documents_the_compiled_reader_hands_over(text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What strict JSON or the compiled reader's types do not allow: read by the streaming reader, as before."""
    from traceql.sources.kineto_decode import decode

    path = tmp_path / "rank0.json"
    path.write_text(text)
    assert decode(path) is None
    assert_same_model(path, monkeypatch)


@pytest.mark.parametrize("gz", [False, True], ids=["json", "json.gz"])
def test_a_byte_order_mark_first_is_skipped_by_both_readers(gz: bool, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import gzip

    from traceql.sources.kineto_decode import decode

    data = b"\xef\xbb\xbf" + f'{{"traceEvents":[{GPU_EVENT}]}}'.encode()
    path = tmp_path / ("rank0.json.gz" if gz else "rank0.json")
    path.write_bytes(gzip.compress(data) if gz else data)
    assert decode(path) is not None
    assert_same_model(path, monkeypatch)
    assert model(path, monkeypatch, compiled=True)["kernels"]
