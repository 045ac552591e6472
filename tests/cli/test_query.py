"""`traceql query`: formats, output files written atomically, the embedded default."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

import traceql
from tests.oracle import count
from tests.paths import DDP_FILES, DDP_TRACE

SQL = "SELECT rank, kind, count(*) AS n FROM kernels GROUP BY ALL ORDER BY rank, kind"
NCCL = ("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName "
        "WHERE s.value {} 'nccl%'")
EXPECTED = [
    {"rank": r, "kind": kind, "n": count(f, NCCL.format("LIKE" if kind == "comm" else "NOT LIKE"))}
    for r, f in enumerate(DDP_FILES) for kind in ("comm", "compute")
]


def test_default_trace_json(invoke) -> None:
    result = invoke("query", SQL, "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == EXPECTED


def test_csv_and_table(invoke) -> None:
    csv = invoke("query", DDP_TRACE, SQL, "--format", "csv").stdout.splitlines()
    assert csv[0] == "rank,kind,n" and csv[1] == f"0,comm,{EXPECTED[0]['n']}" and len(csv) == 5
    table = invoke("query", DDP_TRACE, SQL).stdout
    assert "compute" in table and str(EXPECTED[1]["n"]) in table


def test_output_files(invoke, tmp_path: Path) -> None:
    for fmt in ("parquet", "csv", "json"):
        out = tmp_path / f"r.{fmt}"
        result = invoke("query", DDP_TRACE, SQL, "--format", fmt, "--output", out)
        assert result.exit_code == 0, result.stderr
        df = {"parquet": pl.read_parquet, "csv": pl.read_csv, "json": pl.read_json}[fmt](out)
        assert df.to_dicts() == EXPECTED
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.csv", "r.json", "r.parquet"]


def test_parquet_needs_output(invoke) -> None:
    result = invoke("query", SQL, "--format", "parquet")
    assert result.exit_code == 1 and "give --output PATH" in result.stderr


def test_failed_query_leaves_old_output(invoke, tmp_path: Path) -> None:
    out = tmp_path / "r.csv"
    out.write_text("previous\n")
    result = invoke("query", DDP_TRACE, "SELECT nope FROM kernels", "--output", out, "--format", "csv")
    assert result.exit_code == 4
    assert out.read_text() == "previous\n"
    assert [p.name for p in tmp_path.iterdir()] == ["r.csv"]


LONG = "SELECT sum(a.range * b.range) FROM range(100000000) a, range(1000) b"  # minutes on one core


@pytest.mark.parametrize("after_s", [0.8, 2.5, 6.0])  # loading the code, reading the trace, in the query
def test_ctrl_c_is_one_line_and_130(after_s: float) -> None:
    """A Ctrl-C wherever it lands stops `query` at once: `error: interrupted`, exit 130, nothing else; DuckDB's
    own ways of saying it (InterruptException, RuntimeError) and a query left streaming included."""
    proc = subprocess.Popen([sys.executable, "-m", "traceql", "query", LONG], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    time.sleep(after_s)
    proc.send_signal(signal.SIGINT)
    sent = time.monotonic()
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"query still running 60 s after a Ctrl-C sent {after_s} s in")
    assert (proc.returncode, err, out) == (130, "error: interrupted\n", "")
    assert time.monotonic() - sent < 30


def test_a_trace_whose_connection_a_ctrl_c_closed_still_closes() -> None:
    """A Ctrl-C inside the sealing of a trace closes its connection there (``engine.sealed``); the trace's
    own close() that follows must not fail on it (it did: exit 70 instead of 130, about 1 s into a query)."""
    trace = traceql.read_trace(DDP_TRACE)
    trace._con.close()  # where the interrupted sealing leaves it
    trace.close()
    assert trace.closed
