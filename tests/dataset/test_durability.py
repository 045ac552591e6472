"""No dataset entry is ever lost, no reader ever sees a half-made one: real `traceql dataset add` processes
killed (SIGKILL, through the TRACEQL_FAULT testing hook) or held (TRACEQL_DELAY) at each write step, two
writers racing for one dataset, and `dataset summary` on broken datasets (one line, exit 2)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
from filelock import FileLock, Timeout

from tests.paths import DDP_TRACE, INRUN_TRACE, RUNS, SINGLE_TRACE
from traceql.dataset.store import Dataset

FIRST, SECOND, THIRD = SINGLE_TRACE, DDP_TRACE, INRUN_TRACE  # the entry already there, the one written, a rival
POINTS = ("staged", "locked", "moved", "recorded")
WAIT_S = 90  # for a step of a writer to be reached; a step takes seconds
STAGED_DELAY_S = 8  # a writer asleep with its entry staged, until the test holds it there (SIGSTOP)


def add(root: Path, *sources: Path, fault: str | None = None, delay: str | None = None,
        wait: bool = True) -> subprocess.CompletedProcess[str] | subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TRACEQL_FAULT", "TRACEQL_DELAY")}
    if fault:
        env["TRACEQL_FAULT"] = fault
    if delay:
        env["TRACEQL_DELAY"] = delay
    cmd = [sys.executable, "-m", "traceql", "dataset", "add", str(root), *map(str, sources)]
    if wait:
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def summary(root: Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "traceql", "dataset", "summary", str(root), "--format", "json"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def entries(root: Path) -> dict[str, dict]:
    return json.loads((root / "dataset.json").read_text())["entries"]


def files_under(folder: Path) -> set[Path]:
    """Every file under ``folder``; a writer may remove folders meanwhile (os.walk skips what vanished)."""
    return {Path(top) / name for top, _, names in os.walk(folder) for name in names}


def data_files(root: Path) -> set[Path]:
    return files_under(root / "data")


def staged_files(root: Path) -> list[Path]:
    """Complete staged parquet files (not the temp file one is written to)."""
    return sorted(p for p in files_under(root / ".staging") if p.suffix == ".parquet" and not p.name.startswith("."))


def lock_held(root: Path) -> bool:
    probe = FileLock(root / ".dataset.lock")
    try:
        probe.acquire(timeout=0)
    except Timeout:
        return True
    probe.release()
    return False


def until(condition, what: str, wait_s: float = WAIT_S) -> float:
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < wait_s, f"never reached: {what}"
        time.sleep(0.02)
    return time.monotonic()


def reads_exactly_the_recorded_entries(root: Path) -> pl.DataFrame:
    """Dataset.scan() gives every recorded entry's rows once, and nothing else."""
    recorded = entries(root)
    got = Dataset(root).scan().collect()
    want = pl.concat([pl.read_parquet(root / e["file"]) for e in recorded.values()], how="diagonal_relaxed")
    assert got.equals(want)
    counts = dict(got.group_by("entry_id").len().iter_rows())
    assert counts == {k: e["rows"] for k, e in recorded.items()}
    return got


def entry_of(root: Path, source: Path) -> str:
    (key,) = [k for k, e in entries(root).items() if Path(e["inputs"][0]).is_relative_to(source)]
    return key


@pytest.fixture(scope="module")
def first(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A dataset holding one entry (FIRST), added without fault."""
    root = tmp_path_factory.mktemp("first") / "ds"
    done = add(root, FIRST)
    assert done.returncode == 0, done.stderr
    return root


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory, first: Path) -> Path:
    """FIRST and SECOND, never interrupted: what every recovered dataset must equal."""
    root = tmp_path_factory.mktemp("whole") / "ds"
    shutil.copytree(first, root)
    done = add(root, SECOND)
    assert done.returncode == 0, done.stderr
    return root


def copy_of(first: Path, tmp_path: Path) -> Path:
    root = tmp_path / "ds"
    shutil.copytree(first, root)
    return root


@pytest.mark.parametrize("point", POINTS)
def test_a_writer_killed_at_any_step_loses_nothing(point: str, first: Path, whole: Path, tmp_path: Path) -> None:
    root = copy_of(first, tmp_path)
    (first_id,) = entries(first)
    killed = add(root, SECOND, fault=point)
    assert killed.returncode == -9, killed.stderr
    recorded = entries(root)
    assert first_id in recorded and len(recorded) == (2 if point == "recorded" else 1)
    # what the kill left: the writer really died at that step
    unrecorded = data_files(root) - {root / e["file"] for e in recorded.values()}
    assert len(staged_files(root)) == (1 if point in ("staged", "locked") else 0)
    assert len(unrecorded) == (1 if point == "moved" else 0)
    got = reads_exactly_the_recorded_entries(root)  # readers never see the unrecorded file
    report = summary(root)
    assert report.returncode == 0, report.stderr
    assert sum(r["rows"] for r in json.loads(report.stdout)) == got.height

    rerun = add(root, SECOND)
    assert rerun.returncode == 0, rerun.stderr
    assert ("1 skipped" if point == "recorded" else "1 added") in rerun.stdout
    assert data_files(root) == {root / e["file"] for e in entries(root).values()}  # nothing unrecorded
    assert not [p for p in files_under(root) if p.suffix == ".tmp"]
    assert not list((root / ".staging").rglob("*"))  # nothing staged, no writer's folder or lock
    assert sorted(entries(root)) == sorted(entries(whole))
    for key, entry in entries(whole).items():
        assert entries(root)[key]["rows"] == entry["rows"]
        assert pl.read_parquet(root / entries(root)[key]["file"]).equals(pl.read_parquet(whole / entry["file"]))
    reads_exactly_the_recorded_entries(root)


@pytest.mark.parametrize("point", ["locked", "moved"])
def test_a_writer_waits_for_one_that_holds_the_lock(point: str, first: Path, tmp_path: Path) -> None:
    """The slow writer sleeps 3 s inside the lock; the other starts then, so it must wait: both are recorded,
    the slow one first."""
    root = copy_of(first, tmp_path)
    slow = add(root, SECOND, delay=f"{point}:3", wait=False)
    reached = (lambda: staged_files(root)) if point == "locked" else (lambda: len(data_files(root)) == 2)
    until(reached, f"the slow writer at {point}")
    held_at = until(lambda: lock_held(root), f"the slow writer holding the lock at {point}", wait_s=10)
    fast = add(root, THIRD)
    fast_s = time.monotonic() - held_at
    slow_out, slow_err = slow.communicate(timeout=300)
    assert slow.returncode == 0 and fast.returncode == 0, (slow_err, fast.stderr)
    assert "1 added" in slow_out and "1 added" in fast.stdout
    assert list(entries(root)) == [*entries(first), entry_of(root, SECOND), entry_of(root, THIRD)]
    reads_exactly_the_recorded_entries(root)
    assert not staged_files(root) and not [p for p in files_under(root) if p.suffix == ".tmp"]
    print(f"[{point}] the rival started while the lock was held and finished {fast_s:.1f} s later")


def test_a_staged_entry_survives_another_writers_cleanup(first: Path, tmp_path: Path) -> None:
    """The slow writer is held with its entry staged (outside the lock: asleep there, then stopped with SIGSTOP
    so that it stays there however long the other takes); the other one runs whole meanwhile, its cleanup
    included: the staged file is not taken for an abandoned one, both are recorded."""
    root = copy_of(first, tmp_path)
    slow = add(root, SECOND, delay=f"staged:{STAGED_DELAY_S}", wait=False)
    try:
        until(lambda: staged_files(root), "the slow writer's staged entry")
        os.kill(slow.pid, signal.SIGSTOP)  # within its sleep at "staged": held there until SIGCONT
        staged = staged_files(root)
        assert len(staged) == 1 and not lock_held(root) and slow.poll() is None, "held past the staged step"
        fast = add(root, THIRD)
        assert fast.returncode == 0, fast.stderr
        assert staged_files(root) == staged  # the other's cleanup left the held writer's staged entry alone
    finally:
        os.kill(slow.pid, signal.SIGCONT)
    slow_out, slow_err = slow.communicate(timeout=300)
    assert slow.returncode == 0, slow_err
    assert "1 added" in slow_out and "1 added" in fast.stdout
    assert sorted(entries(root)) == sorted([*entries(first), entry_of(root, SECOND), entry_of(root, THIRD)])
    reads_exactly_the_recorded_entries(root)
    assert not staged_files(root)


def _corrupt_pages(path: Path) -> None:
    """Overwrite every data page, keeping the footer: the schema reads, the rows do not."""
    data = bytearray(path.read_bytes())
    footer = int.from_bytes(data[-8:-4], "little") + 8
    data[4:len(data) - footer] = b"\x55" * (len(data) - footer - 4)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("case", ["missing folder", "no dataset.json", "a file", "a JSON list", "deleted parquet",
                                  "garbage parquet", "corrupt pages"])
def test_summary_of_a_broken_dataset_is_one_line(case: str, first: Path, tmp_path: Path) -> None:
    root = tmp_path / "ds"
    if case == "no dataset.json":
        root.mkdir()
    elif case == "a file":
        root.write_text("not a dataset\n")
    elif case == "a JSON list":
        root.mkdir()
        (root / "dataset.json").write_text("[]")
    elif case != "missing folder":
        shutil.copytree(first, root)
    named = root / "dataset.json" if case == "a JSON list" else root
    if case.endswith("parquet") or case == "corrupt pages":
        (entry,) = entries(root).values()
        named = root / entry["file"]
        if case == "deleted parquet":
            named.unlink()
        elif case == "garbage parquet":
            named.write_bytes(os.urandom(4096))
        else:
            _corrupt_pages(named)
    result = summary(root)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert str(named) in result.stderr
    if case == "deleted parquet":  # a recorded entry whose file went missing is redone by adding it again
        assert "add its source again" in result.stderr
        assert add(root, FIRST).returncode == 0
        assert summary(root).returncode == 0


def _listing(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(folder.rglob("*"))}


@pytest.mark.parametrize("where", ["source", "trace in a run folder", "baseline"])
def test_add_never_writes_inside_its_inputs(where: str, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(RUNS / "gpt2-torch", run)
    before = _listing(run)
    root = run / "slowdowns"
    if where == "source":
        result = add(root, run)
    elif where == "trace in a run folder":
        result = add(root, next(p for p in (run / "traces").iterdir() if p.is_file()))
    else:
        result = add(root, FIRST, "--baseline", run)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1 and "inside the input" in result.stderr
    assert _listing(run) == before
