"""Bad input: one line on stderr naming the file and the problem, the exit code the docs give it (2 unreadable,
3 a trace missing what is needed), the file untouched."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.bad_inputs import CASE_IDS, CASES
from tests.paths import NSYS, sha256


def _snapshot(path: Path) -> dict[str, str]:
    if path.is_dir():
        return {p.name: sha256(p) for p in sorted(path.iterdir())}
    return {path.name: sha256(path)} if path.exists() else {}


@pytest.mark.parametrize("make,phrase,code", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("command", ["info", "query", "ranks", "whatif"])
def test_bad_input_is_one_clear_line(invoke, tmp_path: Path, make, phrase: str, code: int, command: str) -> None:
    path = make(tmp_path)
    before = _snapshot(path)
    siblings = sorted(p.name for p in tmp_path.iterdir())
    args = [command, path] + (["SELECT count(*) FROM kernels"] if command == "query" else [])
    result = invoke(*args)
    assert result.exit_code == code, result.stderr
    err = result.stderr
    assert err.count("\n") == 1 and err.startswith("error: "), err
    assert str(path) in err and phrase in err, err
    assert _snapshot(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == siblings  # no journal or temp file left


@pytest.mark.corpus
def test_directory_of_reports_says_to_export(invoke, tmp_path: Path) -> None:
    rep = NSYS / "toy_ddp2_cap25.nsys-rep"
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
    assert sha256(ddp_copy) == before


def test_good_input_is_left_byte_identical(invoke, ddp_copy: Path) -> None:
    before = sha256(ddp_copy)
    stat = ddp_copy.stat()
    assert invoke("info", ddp_copy).exit_code == 0
    assert invoke("query", ddp_copy, "SELECT count(*) FROM kernels").exit_code == 0
    assert sha256(ddp_copy) == before
    assert ddp_copy.stat().st_mtime_ns == stat.st_mtime_ns
    assert sorted(p.name for p in ddp_copy.parent.iterdir()) == [ddp_copy.name]
