"""Nsight Compute CSVs (raw and details pages) → kernel_metrics, joined to trace kernels."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import polars as pl
import pytest

import traceql
from tests.paths import DDP_TRACE, H200, NSYS, ROOT, RUNS, SINGLE_TRACE, corpus, sha256
from traceql.commands.detect import detect
from traceql.sources.ncu import read_ncu

DETAILS = ROOT / "datasets" / "ncu" / "toy_single_details.csv"
RAW12 = ROOT / "datasets" / "ncu" / "toy_single_raw12.csv"
GPT2_NCU = RUNS / "gpt2-ncu"  # `traceql collect --profiler ncu` of the embedded GPT-2 run: raw + details pages


def csv_rows(path: Path) -> list[dict]:
    lines = [line for line in path.read_text().splitlines() if line.startswith('"')]
    return list(csv.DictReader(lines))


@pytest.mark.corpus
def test_raw_page_loads_every_kernel_and_joins_the_trace(invoke) -> None:
    raw = H200 / "ncu" / "toy_single_raw.csv"
    trace = NSYS / "toy_single.sqlite"
    m = read_ncu(raw)
    assert m.page == "raw" and m.metrics.height == 60
    assert m.metrics["ncu_id"].to_list() == list(range(60))
    rows = [r for r in csv_rows(raw) if r["ID"]]
    assert m.metrics["ncu_duration_ns"].to_list() == [float(r["gpu__time_duration.sum"].replace(",", "")) for r in rows]
    result = invoke("detect", trace, "--metrics", raw, "--format", "json")
    assert result.exit_code == 0, result.stderr
    rate = json.loads(result.stdout)["metrics_match_rate"]
    assert rate >= 0.9


def test_details_page_pivots_to_one_row_per_launch() -> None:
    m = read_ncu(DETAILS)
    assert m.page == "details" and m.metrics.height == 12
    want = {}
    for r in csv_rows(DETAILS):
        if r["Metric Name"] == "Duration":
            scale = {"ns": 1, "us": 1e3, "ms": 1e6}[r["Metric Unit"]]
            want[int(r["ID"])] = float(r["Metric Value"].replace(",", "")) * scale
    assert dict(zip(m.metrics["ncu_id"], m.metrics["ncu_duration_ns"], strict=True)) == want
    units = dict(m.units.iter_rows())
    assert units["Duration"] in {"ns", "us", "ms"} and units["Achieved Occupancy"] == "%"
    assert m.metrics.schema["Registers Per Thread"] == pl.Float64


def test_raw_and_details_agree_on_the_same_launches() -> None:
    raw, details = read_ncu(RAW12).metrics, read_ncu(DETAILS).metrics
    key = ["ncu_id", "short_name", "grid_x", "block_x", "launch_index", "ncu_registers_per_thread"]
    assert raw.select(key).to_dicts() == details.select(key).to_dicts()
    # two separate profiling runs: durations agree within 10 %
    ratio = raw["ncu_duration_ns"] / details["ncu_duration_ns"]
    assert ((ratio > 0.9) & (ratio < 1.1)).all()


def test_prof_lines_are_optional(tmp_path: Path) -> None:
    stripped = tmp_path / "details.csv"
    stripped.write_text("\n".join(line for line in DETAILS.read_text().splitlines() if line.startswith('"')))
    assert read_ncu(stripped).metrics.drop("path").equals(read_ncu(DETAILS).metrics.drop("path"))


@pytest.mark.corpus
def test_toy_details_join_the_toy_trace() -> None:
    result = detect(NSYS / "toy_single.sqlite", metrics=[DETAILS])
    assert result.metrics_match_rate == 1.0
    assert (result.kernels["ncu_match"] == "launch").sum() == 12


def test_kernel_metrics_relation_in_sql(invoke) -> None:
    result = invoke("query", SINGLE_TRACE, DETAILS, "SELECT count(*) AS n, count(DISTINCT kernel_name) AS k, "
                    "max(\"Achieved Occupancy\") <= 100 AS ok FROM kernel_metrics", "--format", "json")
    names = {r["Kernel Name"] for r in csv_rows(DETAILS)}
    assert json.loads(result.stdout) == [{"n": 12, "k": len(names), "ok": True}]
    with traceql.read_trace(SINGLE_TRACE) as t:
        assert t.relation("kernel_metrics").is_empty()


def test_detect_out_rows_carry_metrics(invoke, tmp_path: Path) -> None:
    out = tmp_path / "cases.parquet"
    result = invoke("detect", DDP_TRACE, "--metrics", GPT2_NCU, "--out", out, "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["metrics_match_rate"] == 1.0
    df = pl.read_parquet(out)
    assert {"ncu_duration_ns", "ncu_achieved_occupancy_pct", "ncu_match"} <= set(df.columns)
    counts = dict(df.group_by("ncu_match").len().iter_rows())
    launches = len([r for r in csv_rows(next((GPT2_NCU / "traces").glob("*_raw.csv"))) if r["ID"]])
    assert counts["launch"] == launches == 40  # every profiled launch found its kernel in the window
    assert counts["signature"] > 1000
    launch = df.filter(pl.col("ncu_match") == "launch")
    assert launch["ncu_duration_ns"].null_count() == 0


@pytest.mark.corpus
def test_unmatched_profile_reports_the_match_rate(invoke) -> None:
    gpt2 = NSYS / "gpt2_single.sqlite"
    result = invoke("detect", gpt2, "--metrics", DETAILS, "--format", "json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["metrics_match_rate"] == 0.0
    assert any("only 0.0% of the profiled ncu launches match a kernel of the trace" in x for x in data["notes"])


@pytest.mark.parametrize("case", ["other_csv", "no_kernels", corpus("trace_as_metrics")])
def test_bad_ncu_input(invoke, tmp_path: Path, case: str) -> None:
    if case == "other_csv":  # a CSV of another tool: traceql's own query output
        path = tmp_path / "kernels.csv"
        invoke("query", DDP_TRACE, "SELECT * FROM kernels LIMIT 50", "--format", "csv", "--output", path)
        phrase = "not an Nsight Compute CSV"
    elif case == "no_kernels":
        path = tmp_path / "empty.csv"
        lines = DETAILS.read_text().splitlines()
        path.write_text("\n".join(lines[: next(i for i, x in enumerate(lines) if x.startswith('"ID"')) + 1]))
        phrase = "no profiled kernels"
    else:
        path, phrase = NSYS / "toy_single.sqlite", "not an Nsight Compute CSV"
    before = sha256(path)
    result = invoke("detect", DDP_TRACE, "--metrics", path)
    assert result.exit_code == 2, result.stderr
    assert result.stderr.count("\n") == 1 and str(path) in result.stderr and phrase in result.stderr
    assert sha256(path) == before


def test_unknown_layout(tmp_path: Path) -> None:
    path = tmp_path / "weird.csv"
    path.write_text('"ID","Kernel Name","Grid Size","Block Size","Foo"\n"0","k","(1, 1, 1)","(1, 1, 1)","1"\n')
    with pytest.raises(traceql.InputError, match="unknown ncu CSV layout"):
        read_ncu(path)


def test_raw_durations_follow_their_unit(tmp_path: Path) -> None:
    """The raw page's unit row decides: the same launches in microseconds are 1000 times more nanoseconds."""
    raw = ROOT / "datasets" / "ncu" / "toy_single_raw12.csv"
    lines = raw.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith('"",'))
    header, cells = lines[at - 1].split('","'), lines[at].split('","')
    assert cells[header.index("gpu__time_duration.sum")] == "ns"
    cells[header.index("gpu__time_duration.sum")] = "usecond"
    lines[at] = '","'.join(cells)
    (tmp_path / "us.csv").write_text("\n".join(lines))
    ns, us = read_ncu(raw).metrics["ncu_duration_ns"], read_ncu(tmp_path / "us.csv").metrics["ncu_duration_ns"]
    assert (us == ns * 1000).all() and ns.null_count() == 0
