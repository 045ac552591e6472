"""`traceql query`: formats, output files written atomically, the embedded default."""

from __future__ import annotations

import json
import os
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
from traceql.sources import mirror

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


def test_the_sql_goes_last_and_a_missing_one_is_named(invoke) -> None:
    """SQL first, or no SQL after the files: one line that says the order, exit 2."""
    result = invoke("query", SQL, str(DDP_TRACE))
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert f"the SQL comes last: traceql query FILE... '{SQL}'" in result.stderr
    result = invoke("query", str(DDP_TRACE))
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert "no SQL follows it: traceql query [FILE]... SQL" in result.stderr
    done = invoke("query", str(DDP_TRACE), SQL, "--format", "json")  # the right order still works
    assert done.exit_code == 0 and json.loads(done.stdout) == EXPECTED


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
HAVE_PROC = Path("/proc/self/fd").is_dir()
TICKS = os.sysconf("SC_CLK_TCK") if HAVE_PROC else 100
TRACES = {str(p) for p in DDP_FILES}  # what `query` without files reads: the embedded example


def _cpu_s(pid: int) -> float:
    """The CPU time (user + system) process ``pid`` has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def _reading(pid: int) -> bool:
    """Whether process ``pid`` has one of the embedded traces open, or a file of their columnar copies (the
    cache folder, ``sources.mirror``: what a command reads once a first one made them)."""
    fds = Path(f"/proc/{pid}/fd")
    copies = os.environ.get("TRACEQL_CACHE_DIR") or str(mirror.folder())
    for fd in fds.iterdir():
        try:
            target = os.readlink(fd)
            if target in TRACES or target.startswith(copies + os.sep) and target.endswith(".parquet"):
                return True
        except OSError:
            continue
    return False


def _reach(proc: subprocess.Popen, moment: str, limit_s: float = 120) -> None:
    """Wait until the child is at ``moment``, seen from outside in /proc: ``loading`` its libraries (polars' or
    DuckDB's code mapped), ``reading`` the trace (a trace file open), ``querying`` (it read the traces, then
    used a second of CPU with none open: the query's own work)."""
    deadline = time.monotonic() + limit_s
    read, cpu_at_close = False, None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"query ended before {moment}: {proc.communicate()}")
        try:
            if moment == "loading":
                maps = Path(f"/proc/{proc.pid}/maps").read_text()
                if "polars" in maps or "duckdb" in maps:
                    return
            elif _reading(proc.pid):
                if moment == "reading":
                    return
                read, cpu_at_close = True, None
            elif read:
                cpu = _cpu_s(proc.pid)
                cpu_at_close = cpu if cpu_at_close is None else cpu_at_close
                if cpu - cpu_at_close >= 1.0:
                    return
        except OSError:  # a file of /proc read as it changed
            pass
        time.sleep(0.005)
    pytest.fail(f"query not {moment} after {limit_s} s")


@pytest.mark.skipif(not HAVE_PROC, reason="the moments are seen in /proc")
@pytest.mark.parametrize("moment", ["loading", "reading", "querying"])
def test_ctrl_c_is_one_line_and_130(moment: str) -> None:
    """A Ctrl-C wherever it lands stops `query` at once: `error: interrupted`, exit 130, nothing else; DuckDB's
    own ways of saying it (InterruptException, RuntimeError) and a query left streaming included. The Ctrl-C
    is sent when the child is seen at that moment, however slow the machine."""
    proc = subprocess.Popen([sys.executable, "-m", "traceql", "query", LONG], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        _reach(proc, moment)
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        out, err = proc.communicate(timeout=60)
        took = time.monotonic() - sent
    except subprocess.TimeoutExpired:
        pytest.fail(f"query still running 60 s after a Ctrl-C sent while {moment}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert (proc.returncode, err, out) == (130, "error: interrupted\n", "")
    # stopped at once, not after the query: median 0.32 s over 3 runs of the 3 moments on 2 shared cores
    print(f"[{moment}] exit {took:.2f} s after the Ctrl-C")
    assert took < 30, took


def test_a_trace_whose_connection_a_ctrl_c_closed_still_closes() -> None:
    """A Ctrl-C inside the sealing of a trace closes its connection there (``engine.sealed``); the trace's
    own close() that follows must not fail on it (it did: exit 70 instead of 130, about 1 s into a query)."""
    trace = traceql.read_trace(DDP_TRACE)
    trace._con.close()  # where the interrupted sealing leaves it
    trace.close()
    assert trace.closed


def test_the_relations_listed_and_described_include_collectives(invoke) -> None:
    """SHOW TABLES lists the collectives relation (it was made only when a query named it, so no listing showed
    it), and its row count is that of the embedded run's NCCL kernels, one row per collective and rank (the
    oracle: sqlite3 over each rank's export); --help names it."""
    tables = json.loads(invoke("query", "SHOW TABLES", "--format", "json").stdout)
    assert "collectives" in {t["name"] for t in tables}
    listing = invoke("query", "SHOW TABLES")
    assert "note:" not in listing.stdout + listing.stderr  # the relation's notes only where a query names it
    rows = json.loads(invoke("query", "SELECT count(*) AS n FROM collectives", "--format", "json").stdout)
    assert rows == [{"n": sum(count(f, NCCL.format("LIKE")) for f in DDP_FILES)}]
    assert "collectives" in " ".join(invoke("query", "--help").stdout.split())
