"""Bad input: one line on stderr naming the file and the problem, a non-zero exit, the file untouched."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import DDP_FILE, H200, sha256


def _sqlite_edit(path: Path, statement: str) -> None:
    con = sqlite3.connect(path)
    con.execute(statement)
    con.commit()
    con.close()


def make_missing(tmp: Path) -> Path:
    return tmp / "nope.sqlite"


def make_empty_dir(tmp: Path) -> Path:
    d = tmp / "run"
    d.mkdir()
    (d / "notes.txt").write_text("no traces here\n")
    return d


def make_text(tmp: Path) -> Path:
    p = tmp / "report.sqlite"
    p.write_text("this is a text file, not a trace\n")
    return p


def make_empty(tmp: Path) -> Path:
    p = tmp / "report.sqlite"
    p.touch()
    return p


def make_truncated(tmp: Path) -> Path:
    p = tmp / "report.sqlite"
    data = DDP_FILE.read_bytes()
    p.write_bytes(data[: len(data) // 3])
    return p


def make_not_nsys(tmp: Path) -> Path:
    p = tmp / "other.sqlite"
    _sqlite_edit(p, "CREATE TABLE measurements (x INTEGER)")
    return p


def make_no_kernel_table(tmp: Path) -> Path:
    p = tmp / "report.sqlite"
    shutil.copyfile(DDP_FILE, p)
    _sqlite_edit(p, "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL")
    return p


def make_empty_kernel_table(tmp: Path) -> Path:
    p = tmp / "report.sqlite"
    shutil.copyfile(DDP_FILE, p)
    _sqlite_edit(p, "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL")
    return p


def make_report(tmp: Path) -> Path:
    p = tmp / "gpt2.nsys-rep"
    p.write_bytes(b"NVIDIA Tegra Profiler Report 36398880.\n" + b"\0" * 64)
    return p


CASES: list[tuple[Callable[[Path], Path], str]] = [
    (make_missing, "no such file or directory"),
    (make_empty_dir, "directory holds no traces"),
    (make_text, "not a trace traceql can read"),
    (make_empty, "empty file (0 bytes)"),
    (make_truncated, "truncated SQLite database"),
    (make_not_nsys, "not an Nsight Systems export"),
    (make_no_kernel_table, "was it run with `-t cuda`?"),
    (make_empty_kernel_table, "did the capture range ever start"),
    (make_report, "nsys export --type sqlite"),
]


def _snapshot(path: Path) -> dict[str, str]:
    if path.is_dir():
        return {p.name: sha256(p) for p in sorted(path.iterdir())}
    return {path.name: sha256(path)} if path.exists() else {}


@pytest.mark.parametrize("make,phrase", CASES, ids=[c[0].__name__[5:] for c in CASES])
@pytest.mark.parametrize("command", ["info", "query"])
def test_bad_input_is_one_clear_line(invoke, tmp_path: Path, make, phrase: str, command: str) -> None:
    path = make(tmp_path)
    before = _snapshot(path)
    siblings = sorted(p.name for p in tmp_path.iterdir())
    args = [command, path] + (["SELECT count(*) FROM kernels"] if command == "query" else [])
    result = invoke(*args)
    assert result.exit_code not in (0, None)
    assert result.exception is None or isinstance(result.exception, SystemExit)
    err = result.stderr
    assert err.count("\n") == 1 and err.startswith("error: "), err
    assert str(path) in err and phrase in err, err
    assert "Traceback" not in result.output
    assert _snapshot(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == siblings  # no journal or temp file left


def test_directory_of_reports_says_to_export(invoke, tmp_path: Path) -> None:
    rep = H200 / "nsys" / "toy_ddp2_cap25.nsys-rep"
    if not rep.exists():
        pytest.skip("shared datasets absent")
    d = tmp_path / "reports"
    d.mkdir()
    shutil.copyfile(rep, d / rep.name)
    result = invoke("info", d)
    assert result.exit_code == 2
    assert "1 .nsys-rep report(s)" in result.stderr and "nsys export --type sqlite" in result.stderr


@pytest.mark.parametrize("sql,phrase", [
    ("SELEC 1", "Parser Error"),
    ("SELECT * FROM no_such_table", "the model's relations: runs, ranks, kernels"),
    ("SELECT no_such_column FROM kernels", "Binder Error"),
    ("   ", "empty SQL query"),
])
def test_invalid_sql_shows_duckdb_message(invoke, ddp_copy: Path, sql: str, phrase: str) -> None:
    before = sha256(ddp_copy)
    result = invoke("query", ddp_copy, sql)
    assert result.exit_code == 4
    assert result.stderr.count("\n") == 1 and phrase in result.stderr, result.stderr
    assert "Traceback" not in result.output
    assert sha256(ddp_copy) == before


def test_good_input_is_left_byte_identical(invoke, ddp_copy: Path) -> None:
    before = sha256(ddp_copy)
    stat = ddp_copy.stat()
    assert invoke("info", ddp_copy).exit_code == 0
    assert invoke("query", ddp_copy, "SELECT count(*) FROM kernels").exit_code == 0
    assert sha256(ddp_copy) == before
    assert ddp_copy.stat().st_mtime_ns == stat.st_mtime_ns
    assert sorted(p.name for p in ddp_copy.parent.iterdir()) == [ddp_copy.name]
