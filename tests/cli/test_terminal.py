"""What a person reads in a terminal: at 80 and 100 columns no figure is cut, no line is too wide; and the
small things a new user trips on (options, versions, closed traces, metrics in the table)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import traceql
from tests.paths import DDP_TRACE, INRUN_TRACE, ROOT, RUNS, SINGLE_TRACE
from traceql.cli import common


def fits(text: str, width: int) -> None:
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= width
    assert not [line for line in text.splitlines() if line.endswith(" ")]  # no padding left at a line's end


def ms3(ns: float) -> str:
    return f"{ns / 1e6:,.3f}"


def test_detect_shows_every_figure_whole(invoke, width: int) -> None:
    table = invoke("detect").stdout
    data = json.loads(invoke("detect", "--format", "json").stdout)
    fits(table, width)
    for r in data["ranks"]:
        for figure in (f"{r['comm_comp_overlap_pct']:.2f} %", ms3(r["compute_ns"]), ms3(r["non_compute_ns"]),
                       ms3(r["idle_ns"]), ms3(r["span_ns"]), f"{r['cases']:,}", ms3(r["time_lost_ns"]),
                       f"{r['time_lost_pct']:.2f}"):
            assert figure in table, figure
        # the parts add up to the span
        assert r["compute_ns"] + r["non_compute_ns"] + r["idle_ns"] == r["span_ns"]
    for t in data["top_signatures"]:
        for figure in (f"{t['cases']:,}/{t['instances']:,}", f"{t['median_ratio']:.2f}x", ms3(t["time_lost_ns"])):
            assert figure in table, figure
    per_step = pl.DataFrame(data["steps"]).group_by("step").agg(pl.col("time_lost_ns").sum()).sort("step")
    first = per_step["step"].min()
    assert all(f"{s}{'*' if s == first else ''}:{ms3(v)}" in table for s, v in per_step.iter_rows())
    assert "Next: traceql report" in table


def test_ranks_fits_without_trailing_spaces(invoke, width: int) -> None:
    text = invoke("ranks").stdout
    assert "Steps of gpt2-nsys" in text and "Per rank of gpt2-nsys" in text
    fits(text, width)


def test_info_shows_every_figure_whole(invoke, width: int) -> None:
    table = invoke("info").stdout
    data = json.loads(invoke("info", "--format", "json").stdout)
    fits(table, width)
    for r in data["ranks"]:
        assert ms3(r["span_ns"]) in table and f"{r['kernels']:,}" in table
    for t in data["top_kernels"]:
        for figure in (f"{t['count']:,}", ms3(t["total_ns"]), ms3(t["mean_ns"]), f"{t['pct']:.2f}"):
            assert figure in table, figure
    steps = data["steps"]
    kinds = ", ".join(f"{k} {n}" for k, n in steps["steps_by_kind"].items())
    assert steps["per_rank"][0] == steps["per_rank"][1] and steps["total"] == steps["per_rank"][0] * steps["ranks"]
    assert f"Training steps: {steps['per_rank'][0]} a rank ({kinds}) on {steps['ranks']} ranks" in table


def test_dataset_summary_shows_every_figure_whole(invoke, tmp_path: Path, width: int) -> None:
    root = tmp_path / "ds"
    assert invoke("dataset", "add", root, DDP_TRACE, INRUN_TRACE, "--baseline", SINGLE_TRACE).exit_code == 0
    table = invoke("dataset", "summary", root).stdout
    fits(table, width)
    for r in json.loads(invoke("dataset", "summary", root, "--format", "json").stdout):
        ratios = f"{r['ratio_median']:.2f}/{r['ratio_p90']:.2f}/{r['ratio_max']:.2f}x"
        for figure in (f"{r['rows']:,}", f"{r['cases']:,}", f"{r['undecided']:,}", f"{r['case_pct']:.2f}",
                       f"{r['time_lost_ms']:,.3f}", ratios):
            assert figure in table, figure


def test_wide_tables_keep_long_names_on_one_line(invoke) -> None:
    wide = invoke("--wide", "detect").stdout
    assert "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4_" \
           "execute_kernel__5x_cublas" in wide


def test_version_and_short_help(invoke) -> None:
    assert invoke("--version").stdout.strip() == f"traceql {traceql.__version__}"
    assert "detect [OPTIONS]" in invoke("detect", "-h").stdout and "--baseline" in invoke("detect", "-h").stdout
    assert "dataset [OPTIONS] COMMAND" in invoke("dataset", "-h").stdout


@pytest.mark.parametrize("value", ["1.0", "0.5"])
def test_threshold_is_refused_the_same_way(invoke, value: str) -> None:
    result = invoke("detect", "--threshold", value)
    assert result.exit_code == 2 and result.stderr == f"error: --threshold must be above 1.0 (a slowdown ratio), " \
                                                      f"got {float(value)}\n"
    assert "x>=1.0" not in invoke("detect", "-h").stdout


def test_out_with_an_unknown_suffix_is_refused(invoke, tmp_path: Path) -> None:
    result = invoke("detect", "--out", tmp_path / "cases.txt")
    assert result.exit_code == 2 and "give a .parquet, .csv or .json file" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_outputs_get_the_users_file_mode(invoke, tmp_path: Path) -> None:
    out = tmp_path / "cases.parquet"
    assert invoke("detect", DDP_TRACE, "--out", out).exit_code == 0
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask


def test_a_closed_trace_says_so() -> None:
    with traceql.read_trace(SINGLE_TRACE) as trace:
        assert trace.kernels.height
    with pytest.raises(traceql.QueryError, match="this trace is closed"):
        trace.sql("SELECT 1")


def test_info_on_metrics_alone_names_them(invoke) -> None:
    text = invoke("info", ROOT / "datasets" / "ncu" / "toy_single_details.csv").stdout
    assert "Nsight Compute metrics: 12 profiled launches" in text and "no GPU activity" not in text
    assert "no timeline" in text and "Runs" not in text and "Ranks and GPUs" not in text  # no empty tables


def test_metrics_show_in_the_table(invoke) -> None:
    text = " ".join(invoke("detect", DDP_TRACE, "--metrics", RUNS / "gpt2-ncu").stdout.split())  # lines folded at 80
    assert "Nsight Compute: 100.0% of the profiled launches matched a kernel" in text
    assert "median SM throughput" in text


def test_several_runs_keep_their_top_signatures_apart(invoke) -> None:
    data = json.loads(invoke("detect", DDP_TRACE, INRUN_TRACE, "--top", "20", "--format", "json").stdout)
    runs = {t["run_id"] for t in data["top_signatures"]}
    assert runs == {"gpt2-nsys", "gpt2-inrun-nsys"}
    table = invoke("--wide", "detect", DDP_TRACE, INRUN_TRACE).stdout
    header = next(line for line in table.splitlines() if "grid / block" in line)
    assert header.split()[0] == "run" and "gpt2-inrun-nsys" in table


def _git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)


@pytest.mark.skipif(not (ROOT / ".git").exists() or shutil.which("git") is None, reason="not a git checkout")
def test_collected_runs_are_ignored_and_the_shipped_runs_are_not() -> None:
    """What `traceql collect --out runs/...` writes at the top (docs/commands/collect.md) is never committed; the
    shipped runs of datasets/runs/ are tracked, and a run added there is not ignored."""
    collected = ["runs/gpt2-nsys/manifest.json", "runs/gpt2-nsys/traces/gpt2-nsys_rank0.sqlite"]
    shipped = _git("ls-files", "--", "datasets/runs").stdout.splitlines()
    assert len(shipped) > 100 and "datasets/runs/gpt2-straggler-nsys/manifest.json" in shipped
    new = "datasets/runs/new-run/manifest.json"
    ignored = _git("check-ignore", "--no-index", "--", *collected, *shipped, new)
    assert ignored.returncode in (0, 1), ignored.stderr  # 1: none of them is ignored
    assert ignored.stdout.splitlines() == collected


def test_a_wide_query_result_becomes_records(invoke, width: int) -> None:
    """23 columns cannot fit: each row is printed as `column  value` lines, every number whole."""
    text = invoke("query", DDP_TRACE, "SELECT * FROM kernels ORDER BY start_ns LIMIT 3").stdout
    rows = json.loads(invoke("query", DDP_TRACE, "SELECT * FROM kernels ORDER BY start_ns LIMIT 3",
                             "--format", "json").stdout)
    assert text.count("-- row ") == 3
    for row in rows:
        for col in ("start_ns", "end_ns", "duration_ns", "correlation_id", "launch_ns"):
            assert f"{col.ljust(14)}  {row[col]}" in text


@pytest.mark.parametrize("args,phrase", [
    (["detect", "--threshold", "abc"], "Invalid value for '--threshold'"),
    (["detect", "--top", "0"], "Invalid value for '--top'"),
    (["detect", "--nope"], "No such option: --nope"),
    (["dataset", "add"], "Missing argument 'DIR'"),
    (["report", "--step", "x"], "Invalid value for '--step'"),
])
def test_usage_errors_are_one_line(invoke, args: list[str], phrase: str) -> None:
    result = invoke(*args)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")
    assert phrase in result.stderr and "Usage:" not in result.output


def test_a_long_capture_shows_its_ranks_in_seconds(width: int) -> None:
    """Ranks that span 100 s or more: the per-rank table in seconds, every figure whole at 80 columns."""
    from traceql.cli.detect import print_detect
    from traceql.commands.detect import detect

    result = detect()
    times = ["compute_ns", "non_compute_ns", "idle_ns", "span_ns", "time_lost_ns"]
    long = result.ranks.with_columns(pl.col(times) * 1000)  # the embedded run's spans, 430 ms → 430 s
    result.ranks = long
    with common.console.capture() as captured:
        print_detect(result)
    text = captured.get()
    fits(text, width)
    assert "(times in s)" in text and "(times in ms)" not in text
    for r in long.iter_rows(named=True):
        assert all(ms3(r[c] / 1000) in text for c in times)  # ns / 1e9: seconds, three decimals


@pytest.mark.parametrize("args", [["detect"], ["whatif", str(RUNS / "gpt2-straggler-nsys")],
                                  ["ranks", str(RUNS / "gpt2-straggler-nsys")]], ids=["detect", "whatif", "ranks"])
def test_a_clean_run_writes_nothing_to_stderr(args: list[str]) -> None:
    """As a person runs them (a process of its own, where no test harness catches a library's warning): the
    embedded example and a straggler run leave stderr empty."""
    done = subprocess.run([sys.executable, "-m", "traceql", *args], cwd=ROOT, capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0 and done.stderr == "", done.stderr


def test_a_broken_install_is_one_line_and_exit_70(tmp_path: Path) -> None:
    """DuckDB that cannot load (its library missing: a wheel of another platform) ends like any bug of ours:
    one `internal error` line naming the ImportError, exit 70, no traceback (the handler had itself imported
    the engine, and failed again)."""
    (tmp_path / "duckdb").mkdir()
    (tmp_path / "duckdb" / "__init__.py").write_text('raise ImportError("libduckdb.so: cannot open shared object")')
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    done = subprocess.run([sys.executable, "-m", "traceql", "info", str(DDP_TRACE)], capture_output=True, text=True,
                          env=env, cwd=tmp_path, check=False)
    assert done.returncode == 70 and done.stdout == ""
    assert done.stderr.startswith("error: internal error (ImportError: libduckdb.so: cannot open shared object)")
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_an_error_folds_on_a_terminal_and_stays_one_line_piped(tmp_path: Path) -> None:
    """A long error at an 80-column terminal (a pseudo-terminal) folds at the text's separators; piped, it is
    one line: the same words either way."""
    import fcntl
    import pty
    import struct
    import termios

    missing = tmp_path.joinpath(*["a-rather-long-folder-name"] * 6, "missing.sqlite")
    args = [sys.executable, "-m", "traceql", "-q", "detect", str(missing)]
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    piped = subprocess.run(args, capture_output=True, text=True, env=env, check=False)
    assert piped.returncode == 2 and piped.stderr.count("\n") == 1, piped.stderr
    lead, follow = pty.openpty()
    fcntl.ioctl(follow, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    proc = subprocess.Popen(args, stdin=follow, stdout=follow, stderr=follow, env=env, close_fds=True)
    os.close(follow)
    seen = b""
    while True:
        try:
            chunk = os.read(lead, 4096)
        except OSError:  # the terminal closed: the command is done
            break
        if not chunk:
            break
        seen += chunk
    os.close(lead)
    assert proc.wait() == 2
    lines = [line for line in seen.decode().replace("\r", "").splitlines() if line.strip()]
    assert len(lines) > 1 and max(len(line) for line in lines) <= 80, lines
    assert "".join(lines) == piped.stderr.strip()
