"""Files that are not traces: missing, empty, foreign, FIFOs, devices, links, reports not exported."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tests.bad_inputs.scenario import Scenario, case, detect, sqlite_copy
from tests.paths import ROOT

# --- files that are not traces -------------------------------------------------------------------------------

@case("file")
def missing(tmp: Path) -> Scenario:
    return detect(tmp / "nope.sqlite", 2, "no such file or directory")


@case("file")
def empty_file(tmp: Path) -> Scenario:
    (tmp / "report.sqlite").touch()
    return detect(tmp / "report.sqlite", 2, "empty file (0 bytes)")


@case("file")
def text_file(tmp: Path) -> Scenario:
    (tmp / "report.sqlite").write_text("hello\n")
    return detect(tmp / "report.sqlite", 2, "not a trace traceql can read")


@case("file")
def folder_without_traces(tmp: Path) -> Scenario:
    (tmp / "run").mkdir()
    (tmp / "run" / "notes.txt").write_text("x")
    return Scenario(["detect", tmp / "run"], 2, "directory holds no traces", tmp / "run")


@case("file")
def folder_named_like_a_trace(tmp: Path) -> Scenario:
    (tmp / "x.sqlite").mkdir()
    return Scenario(["info", tmp / "x.sqlite"], 2, "directory holds no traces", tmp / "x.sqlite")


@case("file")
def named_pipe(tmp: Path) -> Scenario:
    os.mkfifo(tmp / "pipe.sqlite")
    return Scenario(["info", tmp / "pipe.sqlite"], 2, "not a regular file", tmp / "pipe.sqlite")


@case("file")
def dangling_link(tmp: Path) -> Scenario:
    (tmp / "link.sqlite").symlink_to(tmp / "gone.sqlite")
    return Scenario(["info", tmp / "link.sqlite"], 2, "a link to nothing", tmp / "link.sqlite")


@case("file")
def device(tmp: Path) -> Scenario:
    return Scenario(["info", Path("/dev/zero")], 2, "not a regular file", Path("/dev/zero"))


@case("file")
def nsys_report(tmp: Path) -> Scenario:
    (tmp / "run.nsys-rep").write_bytes(b"NVIDIA Tegra Profiler Report 3.0\n" + b"\0" * 64)
    return detect(tmp / "run.nsys-rep", 2, "nsys export --type sqlite")


@case("file")
def folder_of_reports(tmp: Path) -> Scenario:
    (tmp / "reps").mkdir()
    (tmp / "reps" / "a.nsys-rep").write_bytes(b"NVIDIA Tegra Profiler Report\n")
    return Scenario(["info", tmp / "reps"], 2, ".nsys-rep report(s): export them", tmp / "reps")


@case("file")
def given_twice(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp)
    return Scenario(["info", path, path], 2, "given twice", path, [path])


@case("file")
def run_folder_with_its_exports_compressed(tmp: Path) -> Scenario:
    """A run folder of the ground-truth matrix as shipped: its exports xz-compressed beside the names its
    manifest gives: the line says which file to unpack, and how."""
    run = shutil.copytree(ROOT / "datasets" / "groundtruth" / "h100-a" / "vit-twin", tmp / "vit-twin")
    packed = next((run / "traces").glob("*.sqlite.xz")).name
    return Scenario(["detect", run], 2, f"but {packed} is beside it: unpack it first (xz -dk {packed})", run)
