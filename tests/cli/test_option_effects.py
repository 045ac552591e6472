"""What the options change, each against an independent oracle (sqlite3 over the trace, tests/oracle.py) or
by comparing the output with and without it: info --top, query --limit, --single-trace, --baseline and
--threshold of whatif, ranks and export (the guard in test_every_option.py asks that every option has such a test)."""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from tests.oracle import nsys_steps, read_kernels, rows, twin_labels
from tests.paths import DDP_FILE, DDP_FILES, DDP_TRACE, INRUN_TRACE, SINGLE_TRACE


def _json(result) -> dict:
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


# --- info --top, query --limit ------------------------------------------------------------------------------


def test_info_top_lists_the_largest_kernels(invoke) -> None:
    """``--top 3``: the 3 kernels of most GPU time, as sqlite3 sums them by demangled name; the default lists
    10, of which these are the first."""
    default = _json(invoke("info", DDP_TRACE, "--format", "json"))["top_kernels"]
    top3 = _json(invoke("info", DDP_TRACE, "--format", "json", "--top", "3"))["top_kernels"]
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for k in read_kernels(DDP_TRACE):
        totals[k["demangled"]][0] += k["end"] - k["start"]
        totals[k["demangled"]][1] += 1
    want = sorted(map(tuple, totals.values()), reverse=True)
    assert len(default) == 10 and len(top3) == 3
    assert [(k["total_ns"], k["count"]) for k in top3] == want[:3]
    assert top3 == default[:3]
    table = invoke("info", DDP_TRACE, "--top", "3").stdout
    section = table[table.index("Top kernels by GPU time"):table.index("Collectives")]
    listed = [line.split()[-3] for line in section.splitlines() if re.search(r" \d+\.\d\d$", line)]
    assert listed == [f"{k['total_ns'] / 1e6:,.3f}" for k in top3]


def _table_rows(text: str) -> list[list[str]]:
    lines = text.splitlines()
    body = lines[lines.index(next(x for x in lines if set(x) == {"-"})) + 1:]
    return [line.split() for line in body if not line.startswith("…")]


def test_query_limit_shows_that_many_rows(invoke) -> None:
    """``--limit 3``: the first 3 rows of the result (sqlite3's first 3 kernel starts) and a line saying more
    follow; the default shows 50; json has every row whatever the limit."""
    sql = "SELECT start_ns FROM kernels ORDER BY start_ns"
    starts = [r[0] for r in rows(DDP_FILE, "SELECT start FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start")]
    three = invoke("query", DDP_FILE, sql, "--limit", "3")
    default = invoke("query", DDP_FILE, sql)
    assert three.exit_code == default.exit_code == 0
    assert [int(r[0]) for r in _table_rows(three.stdout)] == starts[:3]
    assert [int(r[0]) for r in _table_rows(default.stdout)] == starts[:50]
    assert "… more rows" in three.stdout and "… more rows" in default.stdout
    every = _json(invoke("query", DDP_FILE, sql, "--limit", "3", "--format", "json"))
    assert [r["start_ns"] for r in every] == starts and len(starts) > 50
    exact = invoke("query", DDP_FILE, "SELECT rank, count(*) AS n FROM kernels GROUP BY ALL", "--limit", "1")
    assert _table_rows(exact.stdout) == [["0", str(len(starts))]] and "more rows" not in exact.stdout


# --- --single-trace (detect, export perfetto, report) ---------------------------------------------------------

INRUN_FILE = sorted((INRUN_TRACE / "traces").glob("*.sqlite"))[0]  # rank 0 of the in-run collection


def _isolated_kernels(path: Path) -> set[tuple[int, int]]:
    """(device, start) of the compute kernels launched in an isolated step_<i>_nosync range, by sqlite3."""
    steps = nsys_steps(path)
    return {(k["device"], k["start"]) for k in read_kernels(path, keyed=True)
            if not k["comm"] and (steps.get(((k["pid"] >> 24) & 0xFFFFFF, k["corr"])) or (0, ""))[1] == "isolated"}


@pytest.fixture(scope="module")
def inrun_labels(tmp_path_factory: pytest.TempPathFactory) -> dict[bool, tuple[dict, pl.DataFrame]]:
    """detect's JSON and --out rows of rank 0 of the in-run collection, without and with --single-trace."""
    from traceql.cli import app

    out = {}
    for single in (False, True):
        path = tmp_path_factory.mktemp("single") / "cases.parquet"
        args = ["detect", str(INRUN_FILE), "--format", "json", "--out", str(path)] + (["--single-trace"] * single)
        out[single] = (_json(CliRunner().invoke(app, args, catch_exceptions=False)), pl.read_parquet(path))
    return out


def _cases(frame: pl.DataFrame) -> set[tuple[int, int]]:
    hits = frame.filter(pl.col("is_slowdown"))
    return set(zip(hits["device"].to_list(), hits["start_ns"].to_list(), strict=True))


def test_single_trace_labels_with_the_detector(inrun_labels) -> None:
    """Without the option the trace's isolated steps are the reference (in-run twin labels); with it the
    detector labels every normal kernel, and the isolated steps' kernels (sqlite3: those launched in a
    step_<i>_nosync range) stay reference rows, never cases."""
    isolated = _isolated_kernels(INRUN_FILE)
    assert isolated
    for single, (data, frame) in inrun_labels.items():
        source, kinds = ("detector", {"estimate", "none"}) if single else ("inrun", {"twin", "none"})
        assert data["mode"] == source and set(frame["label_source"].unique()) == {source}
        ref = frame.filter(pl.col("baseline_kind") == "reference")
        assert set(zip(ref["device"].to_list(), ref["start_ns"].to_list(), strict=True)) == isolated
        assert not ref["is_slowdown"].any()
        assert set(frame.filter(pl.col("baseline_kind") != "reference")["baseline_kind"].unique()) <= kinds
        assert data["totals"]["cases"] == len(_cases(frame)) > 0
    assert _cases(inrun_labels[False][1]) != _cases(inrun_labels[True][1])


def test_export_single_trace_marks_the_detectors_cases(invoke, inrun_labels, tmp_path: Path) -> None:
    for single in (False, True):
        out = tmp_path / f"trace-{single}.json"
        result = invoke("export", "perfetto", INRUN_FILE, "--output", out, *(["--single-trace"] * single))
        assert result.exit_code == 0, result.stderr
        data = json.loads(out.read_text(), parse_float=Decimal)
        marked = {(e["args"]["device"], int(e["ts"] * 1000)) for e in data["traceEvents"] if e.get("cat") == "slowdown"}
        assert data["otherData"]["label_source"] == ("detector" if single else "inrun")
        assert marked == _cases(inrun_labels[single][1]) and data["otherData"]["cases"] == len(marked)


def test_report_single_trace_says_how_it_labelled(invoke, inrun_labels, tmp_path: Path) -> None:
    for single, flag in ((False, "-o"), (True, "--output")):
        out = tmp_path / f"report-{single}.html"
        result = invoke("report", INRUN_FILE, flag, out, *(["--single-trace"] * single))
        assert result.exit_code == 0, result.stderr
        head = re.search(r"<p class='sub'>(.*?)</p>", out.read_text()).group(1)
        cases = inrun_labels[single][0]["totals"]["cases"]
        assert head.startswith("single-trace labels, by the detector" if single else "in-run labels")
        assert f"{cases:,} slowdown cases" in head and f"{cases:,} slowdown cases" in result.stdout


# --- --baseline, --threshold of whatif, ranks and export ----------------------------------------


def _oracle_cases(factor: float) -> Counter[tuple[int, int]]:
    """(rank, step) → the twin-definition cases (tests/oracle.py, against the isolated run) among the compute
    kernels that normal step launched."""
    labels = twin_labels(DDP_TRACE, SINGLE_TRACE, factor=factor)
    out: Counter[tuple[int, int]] = Counter()
    for rank, path in enumerate(DDP_FILES):
        steps = nsys_steps(path)
        for k in read_kernels(path, keyed=True):
            step = steps.get(((k["pid"] >> 24) & 0xFFFFFF, k["corr"]))
            if step is not None and step[1] == "sync" and labels.get((k["device"], k["start"]), (None, False))[1]:
                out[(rank, step[0])] += 1
    return out


def _by_step(cases: Counter[tuple[int, int]]) -> Counter[int]:
    out: Counter[int] = Counter()
    for (_, step), n in cases.items():
        out[step] += n
    return out


def test_whatif_baseline_and_threshold(invoke) -> None:
    """``--baseline``: each step's cases are the twin labels against the isolated run (sqlite3 oracle), not the
    detector's; ``--threshold 1.5`` the oracle's at 1.5: fewer, and each step without contention no faster than
    at 1.2 (fewer kernels put back to their baseline)."""
    def run(*args: object) -> dict:
        return _json(invoke("whatif", DDP_TRACE, *args, "--format", "json"))

    alone, paired = run(), run("--baseline", SINGLE_TRACE)
    strict = run("--baseline", SINGLE_TRACE, "--threshold", "1.5")
    at12, at15 = _by_step(_oracle_cases(1.2)), _by_step(_oracle_cases(1.5))
    assert at12 != at15
    assert {s["step"]: s["cases"] for s in paired["steps"]} == {s["step"]: at12[s["step"]] for s in paired["steps"]}
    assert {s["step"]: s["cases"] for s in strict["steps"]} == {s["step"]: at15[s["step"]] for s in strict["steps"]}
    assert [s["cases"] for s in alone["steps"]] != [s["cases"] for s in paired["steps"]]
    for low, high in zip(paired["steps"], strict["steps"], strict=True):
        assert low["step"] == high["step"] and low["replayed_ns"] == high["replayed_ns"]
        assert low["without_contention_ns"] <= high["without_contention_ns"] <= high["replayed_ns"]


def test_ranks_threshold_sets_each_steps_cases(invoke) -> None:
    data = _json(invoke("ranks", DDP_TRACE, "--baseline", SINGLE_TRACE, "--threshold", "1.5", "--format", "json"))
    want, default = _oracle_cases(1.5), _oracle_cases(1.2)
    got = {(s["rank"], s["step"]): s["cases"] for s in data["steps"]}
    assert got == {key: want[key] for key in got} and got != {key: default[key] for key in got}


def test_export_threshold_marks_the_twin_cases(invoke, tmp_path: Path) -> None:
    """``--threshold 1.5`` with ``--baseline``: the events marked ``slowdown`` are exactly the oracle's twin
    cases at 1.5, fewer than at the default 1.2."""
    out = tmp_path / "trace.json"
    result = invoke("export", "perfetto", DDP_TRACE, "--baseline", SINGLE_TRACE, "--threshold", "1.5", "-o", out)
    assert result.exit_code == 0, result.stderr
    data = json.loads(out.read_text(), parse_float=Decimal)
    marked = {(e["args"]["device"], int(e["ts"] * 1000)) for e in data["traceEvents"] if e.get("cat") == "slowdown"}
    want = {key for key, (_, case) in twin_labels(DDP_TRACE, SINGLE_TRACE, factor=1.5).items() if case}
    default = {key for key, (_, case) in twin_labels(DDP_TRACE, SINGLE_TRACE).items() if case}
    assert marked == want and want < default
    assert data["otherData"]["threshold"] == Decimal("1.5") and data["otherData"]["label_source"] == "baseline"
