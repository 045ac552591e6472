"""`detect` over several runs: each run labelled on its own, the same whether one after another, in local
worker processes (--workers) or on a Dask scheduler (--scheduler); the options' one-line errors."""

from __future__ import annotations

import json
import shutil
import socket
import sqlite3
from pathlib import Path

import polars as pl
import pytest

from tests.paths import DDP_FILES, DDP_TRACE, INRUN_TRACE, NSYS, RUNS, TINY, corpus
from traceql.commands.detect import detect
from traceql.sources.runs import split_runs


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def loose(tmp_path: Path) -> list[Path]:
    """Loose files: a run of one export per rank (``run_rank0``, ``run_rank1``) and a run of one file."""
    out = [tmp_path / f"run_rank{i}.sqlite" for i in range(2)]
    for src, dst in zip(DDP_FILES, out, strict=True):
        shutil.copyfile(src, dst)
    shutil.copyfile(DDP_FILES[1], tmp_path / "alone.sqlite")
    return [*out, tmp_path / "alone.sqlite"]


def test_runs_are_grouped_as_the_readers_group_them(loose: list[Path], tmp_path: Path) -> None:
    (tmp_path / "other").mkdir()
    twin = tmp_path / "other" / "alone.sqlite"
    shutil.copyfile(loose[2], twin)
    assert split_runs([DDP_TRACE, *loose, twin]) == [[DDP_TRACE], loose[:2], [loose[2]], [twin]]
    assert split_runs([DDP_TRACE]) == [[DDP_TRACE]]
    assert split_runs(None) == [None]  # the embedded example, read as it always was
    ncu = RUNS / "gpt2-ncu"
    assert split_runs([INRUN_TRACE, ncu, loose[2]]) == [[INRUN_TRACE, ncu], [loose[2]]]  # ncu: no timeline
    for rank, src in enumerate(DDP_FILES):  # the same per-rank names in two plain folders: a run in each
        shutil.copyfile(src, tmp_path / "other" / f"run_rank{rank}.sqlite")
    again = sorted((tmp_path / "other").glob("run_rank*.sqlite"))
    assert split_runs([tmp_path / "other", *loose[:2]]) == [[twin], again, loose[:2]]


def test_each_run_is_labelled_on_its_own(loose: list[Path]) -> None:
    """The merged result is the runs' own results one after another; the top signatures are re-cut."""
    runs = [INRUN_TRACE, loose[:2], loose[2]]
    merged = detect([INRUN_TRACE, *loose], top=5)
    alone = [detect(r, top=5) for r in runs]
    for frame in ("ranks", "kernels", "steps"):
        one_by_one = pl.concat([getattr(a, frame) for a in alone], how="diagonal_relaxed")
        assert getattr(merged, frame).equals(one_by_one), frame
    tops = pl.concat([a.top_signatures for a in alone]).sort("time_lost_ns", descending=True).head(5)
    assert merged.top_signatures["time_lost_ns"].to_list() == tops["time_lost_ns"].to_list()
    assert merged.mode == "inrun+detector" and {a.mode for a in alone} == {"inrun", "detector"}
    assert merged.ranks["run_id"].unique(maintain_order=True).to_list() == ["gpt2-inrun-nsys", "run", "alone"]


def test_same_stem_in_two_folders_stays_two_runs(loose: list[Path], tmp_path: Path) -> None:
    (tmp_path / "other").mkdir()
    twin = tmp_path / "other" / "alone.sqlite"
    shutil.copyfile(loose[2], twin)
    runs = detect([loose[2], twin]).ranks["run_id"].unique(maintain_order=True).to_list()
    assert runs == ["alone", "alone#2"]


def test_workers_give_the_serial_result(invoke, loose: list[Path], tmp_path: Path) -> None:
    sources = [DDP_TRACE, *loose, RUNS / "gpt2-torch"]
    serial = invoke("detect", *sources, "--format", "json", "--out", tmp_path / "serial.parquet")
    assert serial.exit_code == 0, serial.stderr
    parallel = invoke("detect", *sources, "--format", "json", "--workers", "2", "--out", tmp_path / "par.parquet")
    assert parallel.exit_code == 0, parallel.stderr
    assert parallel.stdout == serial.stdout
    assert parallel.stderr == serial.stderr.replace("serial.parquet", "par.parquet")
    assert pl.read_parquet(tmp_path / "par.parquet").equals(pl.read_parquet(tmp_path / "serial.parquet"))
    assert len(json.loads(serial.stdout)["ranks"]) == 7


@pytest.mark.parametrize("extra", [pytest.param([], id="embedded"),
                                   corpus([NSYS / "toy_ddp2_cap25.sqlite", NSYS.parent / "nsys-per-rank"],
                                          id="corpus")])
def test_detect_on_a_scheduler(invoke, dask_scheduler: str, loose: list[Path], extra: list[Path]) -> None:
    sources = [INRUN_TRACE, *loose, *extra]
    serial = invoke("detect", *sources, "--format", "json")
    remote = invoke("detect", *sources, "--format", "json", "--scheduler", dask_scheduler)
    assert remote.exit_code == 0, remote.stderr
    assert remote.stdout == serial.stdout and remote.stderr == serial.stderr


def test_a_failed_run_fails_detect_in_one_line(invoke, dask_scheduler: str, loose: list[Path],
                                               tmp_path: Path) -> None:
    bad = tmp_path / "no_capture.sqlite"  # a database, but no export: it fails when read, on a worker
    with sqlite3.connect(bad) as con:
        con.execute("CREATE TABLE notes (text TEXT)")
    result = invoke("detect", loose[2], bad, "--scheduler", dask_scheduler)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"error: {bad}:")


@pytest.mark.parametrize("command", [("detect",), ("dataset", "add", "DIR", str(DDP_TRACE)),
                                     ("dataset", "build", str(TINY / "sweep.json"), "--out", "DIR")],
                         ids=["detect", "add", "build"])
def test_workers_and_scheduler_exclude_each_other(invoke, tmp_path: Path, command: tuple[str, ...]) -> None:
    args = [str(tmp_path / "ds") if a == "DIR" else a for a in command]
    result = invoke(*args, "--workers", "2", "--scheduler", "tcp://127.0.0.1:8786")
    assert result.exit_code == 2
    assert result.stderr == ("error: --workers and --scheduler exclude each other: the scheduler's workers do "
                             "the work\n")
    assert not (tmp_path / "ds").exists()


@pytest.mark.parametrize("command", [("detect",), ("dataset", "add", "DIR", str(DDP_TRACE))], ids=["detect", "add"])
def test_an_unreachable_scheduler_is_one_line(invoke, tmp_path: Path, command: tuple[str, ...]) -> None:
    address = f"tcp://127.0.0.1:{_closed_port()}"
    args = [str(tmp_path / "ds") if a == "DIR" else a for a in command]
    result = invoke(*args, "--scheduler", address)
    assert result.exit_code == 2
    assert result.stderr == f"error: cannot reach the Dask scheduler at {address} (connection refused)\n"
