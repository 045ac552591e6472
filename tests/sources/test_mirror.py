"""The exports' columnar copies (``traceql.sources.mirror``): every shipped nsys run reads to the same model
with and without them, cold and warm; a rewritten or truncated export is never served from its copy; the input
stays byte-identical with nothing beside it; copies are evicted least recently used first, written once by
commands racing each other, and `traceql cache info | clear` says and removes them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from tests.paths import DDP_FILE, ROOT, SINGLE_FILE
from traceql.model.schema import RELATIONS
from traceql.sources import mirror
from traceql.trace import read_trace

NSYS_RUNS = sorted({p.parents[1] for p in (ROOT / "datasets").glob("*/*/traces/*.sqlite")})


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache folder of the test's own."""
    where = tmp_path / "cache"
    monkeypatch.setenv(mirror.DIR_ENV, str(where))
    monkeypatch.delenv(mirror.OFF_ENV, raising=False)
    return where


def _model(paths: list[Path] | Path) -> tuple[dict[str, pl.DataFrame], list[str]]:
    with read_trace(paths) as trace:
        return {name: trace.con.execute(f"SELECT * FROM {name}").pl() for name in RELATIONS}, trace.notes


def _same(a: dict[str, pl.DataFrame], b: dict[str, pl.DataFrame]) -> None:
    """The same rows in every relation (in the same order where the model orders them: steps and waits it
    leaves in DuckDB's order, which varies run to run)."""
    for name in RELATIONS:
        x, y = a[name], b[name]
        if name in ("steps", "waits"):
            x, y = x.sort(x.columns, nulls_last=True), y.sort(y.columns, nulls_last=True)
        assert x.equals(y, null_equal=True), name


def test_every_shipped_run_reads_the_same_with_its_copies(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert len(NSYS_RUNS) >= 25
    for run in NSYS_RUNS:
        monkeypatch.setenv(mirror.OFF_ENV, "1")
        made = len(mirror.entries())
        itself = _model(run)
        assert len(mirror.entries()) == made  # off: nothing written
        monkeypatch.delenv(mirror.OFF_ENV)
        cold, warm = _model(run), _model(run)
        _same(itself[0], cold[0])
        _same(itself[0], warm[0])
        assert itself[1] == cold[1] == warm[1], run
    files = sorted((ROOT / "datasets").glob("*/*/traces/*.sqlite"))
    assert len(mirror.entries()) == len({mirror.identity(f) for f in files})  # one copy per export
    for table in mirror.KEPT:  # the CUDA calls', kernels' and memory operations' copies: the columns read alone
        copies = [p for e in mirror.entries() if (p := e[0] / f"{table}.parquet").exists()]
        assert len(copies) >= 25, table
        assert {tuple(pl.read_parquet_schema(p)) for p in copies} == {mirror.KEPT[table]}, table


def test_the_copy_is_what_a_windowed_read_reads(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run read a window of steps at a time (each window a shard of its own) gives the labels it gives read
    from the exports themselves."""
    from traceql.commands.detect import detect

    monkeypatch.setenv("TRACEQL_WINDOW_KERNELS", "2000")
    run = ROOT / "datasets" / "runs" / "gpt2-4rank-straggler-nsys"
    monkeypatch.setenv(mirror.OFF_ENV, "1")
    itself = detect([run], workers=1).kernels
    monkeypatch.delenv(mirror.OFF_ENV)
    copied = detect([run], workers=1).kernels
    assert len(mirror.entries()) == 4 and itself.height > 10_000
    assert itself.equals(copied, null_equal=True)


def test_a_rewritten_export_is_never_read_from_its_copy(cache: Path, tmp_path: Path) -> None:
    path = tmp_path / "run_rank0.sqlite"
    shutil.copyfile(DDP_FILE, path)
    first = _model(path)[0]["kernels"].height
    assert first > 0 and len(mirror.entries()) == 1
    stamp = path.stat().st_mtime_ns
    shutil.copyfile(SINGLE_FILE, path)  # another export under the same name and time
    os.utime(path, ns=(stamp, stamp))
    import sqlite3

    with sqlite3.connect(f"file:{SINGLE_FILE}?mode=ro", uri=True) as con:
        want = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    assert want != first and _model(path)[0]["kernels"].height == want
    with path.open("r+b") as fh:  # cut short: refused as the export itself is, never read from a copy
        fh.truncate(path.stat().st_size // 2)
    os.utime(path, ns=(stamp, stamp))
    done = subprocess.run([sys.executable, "-m", "traceql", "info", str(path)], capture_output=True, text=True,
                          env={**os.environ, mirror.DIR_ENV: str(cache)})
    assert done.returncode != 0 and done.stderr.startswith(f"error: {path}: ") and done.stdout == ""


def test_the_input_is_left_as_it_was(cache: Path, tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    path = folder / DDP_FILE.name
    shutil.copyfile(DDP_FILE, path)
    before = path.read_bytes(), path.stat().st_mtime_ns
    _model(path)
    _model(path)
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before and [p.name for p in folder.iterdir()] == [
        path.name]


def test_least_recently_used_copies_go_first(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _model(DDP_FILE)
    (old,) = mirror.entries()
    hour_ago = time.time() - 2 * mirror.BUSY_S
    os.utime(old[0] / "manifest.json", (hour_ago, hour_ago))
    monkeypatch.setenv(mirror.LIMIT_ENV, str(old[1] + 1))  # room for one copy
    _model(SINGLE_FILE)
    assert [e[3] for e in mirror.entries()] == [str(SINGLE_FILE)]
    _model(DDP_FILE)  # a copy in use is never taken: both stay, over the bound, until one is old
    assert len(mirror.entries()) == 2


def test_commands_racing_on_one_export_write_one_copy(cache: Path) -> None:
    env = {**os.environ, mirror.DIR_ENV: str(cache), "COLUMNS": "80"}
    procs = [subprocess.Popen([sys.executable, "-m", "traceql", "detect", str(DDP_FILE.parents[1]), "--format",
                               "json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT)
             for _ in range(3)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0] and [o[1] for o in outs] == [b""] * 3
    assert len({o[0] for o in outs}) == 1
    assert len(mirror.entries()) == 2 and [p.name for p in cache.iterdir() if p.name.startswith(".")] == []


def test_an_unwritable_cache_is_no_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")
    monkeypatch.setenv(mirror.DIR_ENV, str(blocked / "cache"))  # under a file: cannot be made
    assert _model(DDP_FILE)[0]["kernels"].height > 0 and mirror.entries() == []


def test_cache_info_and_clear(invoke, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = json.loads(invoke("cache", "info", "--format", "json").stdout)
    assert empty["copies"] == [] and empty["enabled"] and empty["folder"] == str(cache)
    invoke("info")
    invoke("--no-cache", "info", SINGLE_FILE)  # off for this command: no copy of it
    data = json.loads(invoke("cache", "info", "--format", "json").stdout)
    on_disk = sum(p.stat().st_size for p in cache.rglob("*") if p.is_file())
    assert sorted(c["export"] for c in data["copies"]) == [str(f) for f in sorted(DDP_FILE.parent.glob("*"))]
    assert data["bytes"] == on_disk and data["limit_bytes"] == mirror.LIMIT
    monkeypatch.setenv("COLUMNS", "400")  # a terminal wide enough for any checkout's path: none folded
    text = invoke("cache", "info")
    assert text.exit_code == 0 and "2 copies" in text.stdout
    assert all(str(f) in text.stdout for f in DDP_FILE.parent.glob("*"))
    cleared = invoke("cache", "clear")
    assert cleared.exit_code == 0 and cleared.stdout.startswith("removed 2 copies and 0 results")
    assert mirror.entries() == [] and DDP_FILE.is_file()


def test_a_bad_cache_limit_is_one_line(invoke, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(mirror.LIMIT_ENV, "lots")
    result = invoke("cache", "info")
    assert result.exit_code == 2 and result.stderr.startswith("error: TRACEQL_CACHE_LIMIT='lots': a size such as")
