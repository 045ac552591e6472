"""`dataset add` on a Dask cluster: the same entries, rows and outcomes as one after another, whatever order
the traces finish in; a trace that fails is reported while the others are added."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from tests.paths import DDP_TRACE, INRUN_TRACE, NSYS, ROOT, RUNS, SINGLE_TRACE, corpus
from traceql.commands import dataset


def _entries(root: Path) -> dict[str, dict]:
    """dataset.json's entries, without the time each was added."""
    entries = json.loads((root / "dataset.json").read_text())["entries"]
    return {k: {f: v for f, v in e.items() if f != "added"} for k, e in entries.items()}


def _rows(root: Path) -> dict[str, pl.DataFrame]:
    return {k: pl.read_parquet(root / e["file"]) for k, e in _entries(root).items()}


@pytest.fixture
def no_kernels(tmp_path: Path) -> Path:
    """A SQLite database that is no nsys export: it fails when labelled, not when its header is checked."""
    path = tmp_path / "not_a_capture.sqlite"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE notes (text TEXT)")
    return path


@pytest.mark.parametrize("more", [pytest.param([], id="embedded"),
                                  corpus([NSYS / "toy_ddp2_cap25.sqlite", NSYS / "gpt2_ddp2_cap2.sqlite"],
                                         id="corpus")])
def test_cluster_gives_the_serial_dataset(invoke, dask_scheduler: str, tmp_path: Path, no_kernels: Path,
                                          more: list[Path]) -> None:
    sources = [DDP_TRACE, no_kernels, INRUN_TRACE, RUNS / "gpt2-torch", RUNS / "seqpar-nsys", *more]
    baselines = ["--baseline", SINGLE_TRACE, *(["--baseline", NSYS / "toy_single.sqlite"] if more else [])]
    serial = invoke("dataset", "add", tmp_path / "serial", *sources, *baselines)
    remote = invoke("dataset", "add", tmp_path / "remote", *sources, *baselines, "--scheduler", dask_scheduler)
    assert serial.exit_code == remote.exit_code == 1, remote.stderr  # one source failed: exit 1, as always
    assert remote.stdout == serial.stdout and remote.stderr == serial.stderr
    assert f"{len(sources) - 1} added, 1 failed" in remote.stdout
    assert serial.stderr.startswith(f"error: {no_kernels}: ") and serial.stderr.count("\n") == 1
    a, b = _entries(tmp_path / "serial"), _entries(tmp_path / "remote")
    assert list(a) == list(b) and a == b  # recorded in the order given, with the same metadata
    rows_a, rows_b = _rows(tmp_path / "serial"), _rows(tmp_path / "remote")
    for key in rows_a:
        assert rows_b[key].equals(rows_a[key]), key


def test_local_workers_add_then_skip(dask_scheduler: str, tmp_path: Path, no_kernels: Path) -> None:
    """--workers 2: the outcomes in the order given (a failure among them), progress as each finishes; added
    again (on the scheduler), every entry is skipped without being recorded twice."""
    sources = [RUNS / "seqpar-nsys", no_kernels, DDP_TRACE]
    seen: list[tuple[int, int | None, str]] = []
    first = dataset.add(tmp_path / "ds", sources, baselines=[SINGLE_TRACE], workers=2,
                        progress=lambda *a: seen.append(a))
    assert [o.status for o in first] == ["added", "failed", "added"]
    assert first[1].name == str(no_kernels) and str(no_kernels) in first[1].message
    assert sorted(s[0] for s in seen) == [1, 2, 3] and {s[1] for s in seen} == {3}
    assert {s[2] for s in seen} == {str(p) for p in sources}
    again = dataset.add(tmp_path / "ds", sources, baselines=[SINGLE_TRACE], scheduler=dask_scheduler)
    assert [o.status for o in again] == ["skipped", "failed", "skipped"]
    assert [o.name for o in again if o.status == "skipped"] == [o.name for o in first if o.status == "added"]
    assert len(_entries(tmp_path / "ds")) == 2


def test_ctrl_c_stops_the_workers_too(tmp_path: Path) -> None:
    """A Ctrl-C reaches the terminal's whole process group: one line, exit 130, no worker left, no traceback;
    the entries recorded before it stay whole."""
    root = tmp_path / "ds"
    sources = [DDP_TRACE, INRUN_TRACE, *sorted(RUNS.glob("*-nsys")), RUNS / "gpt2-torch"]
    proc = subprocess.Popen([sys.executable, "-m", "traceql", "dataset", "add", str(root), *map(str, sources),
                             "--workers", "2"], cwd=ROOT, start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (root / "dataset.json").exists() or not _entries(root):  # once the first entry is in
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130 and err == "error: interrupted\n", err
    assert 1 <= len(_entries(root)) < len(sources), "the Ctrl-C came too late to stop anything"
    exited = time.monotonic()
    deadline = exited + 30  # the workers' own exit takes a moment: median 1.5 s over 3 runs on 2 shared cores
    while (left := subprocess.run(["pgrep", "-a", "-g", str(proc.pid)], capture_output=True, text=True).stdout) \
            and time.monotonic() < deadline:
        time.sleep(0.2)
    print(f"the group was empty {time.monotonic() - exited:.2f} s after traceql exited")
    assert left == "", f"processes left in the group: {left}"
