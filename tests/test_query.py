"""`traceql query`: formats, output files written atomically, the embedded default."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from tests.conftest import DDP_TRACE

SQL = "SELECT rank, kind, count(*) AS n FROM kernels GROUP BY ALL ORDER BY rank, kind"
EXPECTED = [
    {"rank": 0, "kind": "comm", "n": 120}, {"rank": 0, "kind": "compute", "n": 5770},
    {"rank": 1, "kind": "comm", "n": 120}, {"rank": 1, "kind": "compute", "n": 5770},
]


def test_default_trace_json(invoke) -> None:
    result = invoke("query", SQL, "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout) == EXPECTED


def test_csv_and_table(invoke) -> None:
    csv = invoke("query", DDP_TRACE, SQL, "--format", "csv").stdout.splitlines()
    assert csv[0] == "rank,kind,n" and csv[1] == "0,comm,120" and len(csv) == 5
    table = invoke("query", DDP_TRACE, SQL).stdout
    assert "compute" in table and "5770" in table


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
