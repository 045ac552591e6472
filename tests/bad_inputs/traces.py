"""Traces broken the ways users break them (missing, empty, cut short, not an export), each with the phrase its
one-line error must contain and its exit code."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

from tests.paths import DDP_FILE


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


# (maker, phrase of the error line, exit code: 2 unreadable input, 3 a trace missing what is needed — docs/inputs.md)
CASES: list[tuple[Callable[[Path], Path], str, int]] = [
    (make_missing, "no such file or directory", 2),
    (make_empty_dir, "directory holds no traces", 2),
    (make_text, "not a trace traceql can read", 2),
    (make_empty, "empty file (0 bytes)", 2),
    (make_truncated, "truncated SQLite database", 2),
    (make_not_nsys, "not an Nsight Systems export", 2),
    (make_no_kernel_table, "was it run with `-t cuda`?", 3),
    (make_empty_kernel_table, "did the capture range ever start", 3),
    (make_report, "nsys export --type sqlite", 2),
]

CASE_IDS = [make.__name__[5:] for make, _, _ in CASES]
