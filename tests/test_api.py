"""The Python API: read_trace, relations as polars frames, SQL over the model."""

from __future__ import annotations

import polars as pl
import pytest

import traceql
from tests.oracle import count
from tests.paths import DDP_FILES, DDP_TRACE, SINGLE_TRACE
from traceql.model import schema

KERNELS = "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL"


@pytest.fixture(scope="module")
def trace():
    with traceql.read_trace(DDP_TRACE) as t:
        yield t


def test_relations_follow_the_model_contract(trace) -> None:
    for name in schema.RELATIONS:
        df = trace.relation(name)
        assert isinstance(df, pl.DataFrame)
        assert df.columns == schema.columns(name)
    k = trace.kernels
    assert k.height == count(DDP_TRACE, KERNELS)
    assert k.filter(pl.col("duration_ns") != pl.col("end_ns") - pl.col("start_ns")).is_empty()
    assert set(k["kind"].unique()) == {"compute", "comm"}
    assert k.filter(pl.col("kind") == "comm")["short_name"].str.starts_with("nccl").all()
    assert k["name"].null_count() == 0 and k["short_name"].null_count() == 0
    assert k.schema["start_ns"] == pl.Int64


def test_nvtx_steps_and_gpus(trace) -> None:
    steps = trace.sql("SELECT rank, count(*) AS n FROM nvtx WHERE text LIKE 'step_%' GROUP BY rank ORDER BY rank")
    want = count(DDP_FILES[0], "SELECT count(*) FROM NVTX_EVENTS WHERE text LIKE 'step_%'")
    assert want == 5  # the collector's window: 5 steps
    assert steps.to_dicts() == [{"rank": 0, "n": want}, {"rank": 1, "n": want}]
    g = trace.gpus
    assert g["name"].to_list() == ["NVIDIA H200", "NVIDIA H200"]
    assert g["sm_count"].to_list() == [132, 132]


def test_memcpy_counts_match_sqlite3(trace) -> None:
    memcpy = count(DDP_TRACE, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY")
    memset = count(DDP_TRACE, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMSET")
    got = dict(trace.sql("SELECT kind, count(*) FROM memcpy GROUP BY kind").iter_rows())
    assert got == {"memcpy": memcpy, "memset": memset}


def test_sql_with_parameters(trace) -> None:
    df = trace.sql("SELECT count(*) AS n FROM kernels WHERE rank = ? AND kind = ?", [1, "comm"])
    assert df.item() == count(DDP_FILES[1], KERNELS + " k JOIN StringIds s ON s.id = k.shortName "
                              "WHERE s.value LIKE 'nccl%'") > 0


def test_two_traces_stay_two_runs() -> None:
    with traceql.read_trace([DDP_TRACE, SINGLE_TRACE]) as t:
        runs = t.sql("SELECT run_id, count(*) AS n FROM kernels GROUP BY run_id ORDER BY run_id").to_dicts()
    assert runs == [{"run_id": "gpt2-nsys", "n": count(DDP_TRACE, KERNELS)},
                    {"run_id": "gpt2-single-nsys", "n": count(SINGLE_TRACE, KERNELS)}]


def test_errors_are_one_family(tmp_path) -> None:
    with pytest.raises(traceql.InputError):
        traceql.read_trace(tmp_path / "missing.sqlite")
    with traceql.read_trace() as t, pytest.raises(traceql.QueryError):
        t.sql("SELECT * FROM nothing_here")
    assert issubclass(traceql.SchemaError, traceql.TraceqlError)


def test_every_public_name_resolves() -> None:
    """What ``traceql.__all__`` promises is there, loaded on first use."""
    for name in traceql.__all__:
        assert getattr(traceql, name) is not None, name
    assert traceql.ranks.__module__ == "traceql.commands.ranks" and traceql.diff.__module__ == "traceql.commands.diff"


def test_the_command_lines_threshold_is_the_analyzers_paired_factor() -> None:
    """Written twice on purpose (the command line shows it without loading polars; the leaf imports no
    traceql): the two must agree."""
    from traceql.analyzers.detection import labels
    from traceql.labelling import options

    assert options.PAIRED_FACTOR == labels.PAIRED_FACTOR == 1.2
