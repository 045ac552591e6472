"""Slowdown datasets: labels equal detect's, summaries, atomic and resumable writes, sweeps on CPU."""

from __future__ import annotations

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

from tests.paths import DDP_TRACE, INRUN_TRACE, NSYS, ROOT, RUNS, SINGLE_TRACE
from traceql.commands.detect import detect

PAIRS = {f"{m}_ddp2_{c}": f"{m}_single" for m in ("toy", "gpt2") for c in ("cap25", "cap2")}


def entry_rows(root: Path) -> dict[str, pl.DataFrame]:
    meta = json.loads((root / "dataset.json").read_text())
    return {k: pl.read_parquet(root / e["file"]) for k, e in meta["entries"].items()}


@pytest.mark.corpus
def test_corpus_dataset_labels_equal_detect(invoke, tmp_path: Path) -> None:
    nsys = NSYS
    root = tmp_path / "ds"
    traces = [nsys / f"{t}.sqlite" for t in PAIRS]
    result = invoke("dataset", "add", root, *traces, "--baseline", nsys / "toy_single.sqlite",
                    "--baseline", nsys / "gpt2_single.sqlite")
    assert result.exit_code == 0, result.stderr
    rows = entry_rows(root)
    assert len(rows) == 4
    meta = json.loads((root / "dataset.json").read_text())["entries"]
    for trace in traces:
        (key,) = [k for k in rows if k.startswith(trace.stem + "-")]
        assert Path(meta[key]["baseline"]).stem == PAIRS[trace.stem]  # each got its own isolated run
        want = detect(trace, baseline=[nsys / f"{PAIRS[trace.stem]}.sqlite"]).kernels
        got = rows[key]
        assert got["is_slowdown"].to_list() == want["is_slowdown"].to_list()
        assert got["start_ns"].to_list() == want["start_ns"].to_list()
        assert (got["label_source"] == "baseline").all()
    summary = json.loads(invoke("dataset", "summary", root, "--format", "json").stdout)
    assert {(s["model"], s["cases"]) for s in summary} == {
        (t, int(rows[k]["is_slowdown"].sum())) for t in PAIRS for k in rows if k.startswith(t + "-")}
    table = invoke("dataset", "summary", root).stdout
    assert "gpt2_ddp2_cap2" in table and "median/p90/max" in table  # the ratio distribution of the cases


def test_undecided_rows_are_kept_as_null_and_read_back(invoke, tmp_path: Path) -> None:
    """The detector on the embedded run: a kernel that overlapped communication and was judged on a contaminated
    reference, or none, and is not a case, is undecided: null in the dataset, in `detect --out` and the API, and
    counted apart by the summaries."""
    root, out = tmp_path / "ds", tmp_path / "rows.parquet"
    added = invoke("dataset", "add", root, DDP_TRACE)  # no isolated run: the detector's labels
    assert added.exit_code == 0, added.stderr
    (rows,) = entry_rows(root).values()
    undecided = rows.filter(pl.col("is_slowdown").is_null())
    assert undecided.height > 100 and (undecided["comm_overlap_ns"] > 0).all()
    assert set(undecided["reference_kind"].unique()) <= {"contaminated", "none"}
    assert f"kept {undecided.height:,} undecided rows (is_slowdown null" in added.stdout
    # nothing else is null: a kernel that overlapped nothing, or had a clean reference, is decided
    assert rows.filter(pl.col("comm_overlap_ns") == 0)["is_slowdown"].null_count() == 0
    assert rows.filter(pl.col("reference_kind") == "clean")["is_slowdown"].null_count() == 0
    api = detect(DDP_TRACE, out=out)
    assert api.kernels["is_slowdown"].null_count() == undecided.height == api.undecided()
    assert pl.read_parquet(out)["is_slowdown"].null_count() == undecided.height
    totals = api.to_dict()["totals"]
    overlapped = int((rows["comm_overlap_ns"] > 0).sum())
    assert totals["decided_share"] == round(1 - undecided.height / overlapped, 4) and totals["undecided"] > 0
    summary = json.loads(invoke("dataset", "summary", root, "--format", "json").stdout)
    assert [(s["cases"], s["undecided"]) for s in summary] == [(int(rows["is_slowdown"].sum()), undecided.height)]
    assert summary[0]["case_pct"] == round(100 * rows["is_slowdown"].drop_nulls().mean(), 2)


SOURCES = [DDP_TRACE, RUNS / "gpt2-torch", RUNS / "seqpar-nsys"]


def _add_command(root: Path) -> list[str]:
    return [sys.executable, "-m", "traceql", "dataset", "add", str(root), *map(str, SOURCES),
            "--baseline", str(SINGLE_TRACE)]


def test_a_killed_build_resumes_to_the_same_dataset(tmp_path: Path) -> None:
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    subprocess.run(_add_command(whole), check=True, capture_output=True)
    proc = subprocess.Popen(_add_command(killed), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # kill it once the first entry is recorded, mid-way
        meta = killed / "dataset.json"
        if meta.exists() and json.loads(meta.read_text())["entries"]:
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = json.loads((killed / "dataset.json").read_text())["entries"]
    assert 1 <= len(partial) < len(SOURCES), "the kill came too late to test a resume"
    rerun = subprocess.run(_add_command(killed), capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr
    assert f"{len(partial)} skipped" in rerun.stdout
    a, b = entry_rows(whole), entry_rows(killed)
    assert sorted(a) == sorted(b)
    for key in a:
        assert a[key].drop("source").equals(b[key].drop("source"))
    files = sorted(p.relative_to(killed) for p in (killed / "data").rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(whole) for p in (whole / "data").rglob("*") if p.is_file())
    assert not [f for f in files if f.name.startswith(".")]  # no temp file left behind
    total = pl.scan_parquet(str(killed / "data" / "**" / "*.parquet")).select(pl.len()).collect().item()
    assert total == sum(df.height for df in b.values())  # a plain reader sees every row once


def test_bad_dataset_inputs(invoke, tmp_path: Path) -> None:
    result = invoke("dataset", "add", tmp_path / "ds", tmp_path / "missing.sqlite")
    assert result.exit_code == 1 and "1 failed" in result.stdout
    assert result.stderr == f"error: {tmp_path / 'missing.sqlite'}: no such file or directory\n"
    assert not (tmp_path / "ds").exists()  # nothing added to a new folder: none left behind
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "dataset.json").write_text('{"format": "something-else"}')
    result = invoke("dataset", "summary", tmp_path / "other")
    assert result.exit_code == 2 and "not a traceql dataset" in result.stderr
    sweep = tmp_path / "sweep.json"
    sweep.write_text(json.dumps({"inputs": ["x"], "grid": {"lr": [1, 2]}}))
    result = invoke("dataset", "build", sweep, "--out", tmp_path / "ds2")
    assert result.exit_code == 2 and "grid: unknown key(s) lr; keys must be among" in result.stderr


def test_sweep_on_cpu_collects_labels_resumes_and_survives_a_failure(invoke, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    sweep = tmp_path / "sweep.json"
    tiny = ROOT / "datasets" / "examples" / "tiny"
    sweep.write_text(json.dumps({"inputs": [str(tiny)], "grid": {"cap_size": [1, 2], "epochs": [1]},
                                 "profiler": "torch", "timeout": 120, "device": "cpu"}))
    root = tmp_path / "ds"
    first = invoke("dataset", "build", sweep, "--out", root, "--collect-only")
    assert first.exit_code == 0, first.stderr
    assert "2 collected" in first.stdout
    runs = sorted(p.name for p in (root / "runs").iterdir())
    assert runs == ["tiny-cap_size1_epochs1", "tiny-cap_size2_epochs1", "tiny-isolated-epochs1"]
    stamp = (root / "runs" / runs[0] / "manifest.json").stat().st_mtime_ns
    second = invoke("dataset", "build", sweep, "--out", root)  # labels the runs it finds, collects nothing
    assert second.exit_code == 0, second.stderr
    assert "2 added" in second.stdout
    assert (root / "runs" / runs[0] / "manifest.json").stat().st_mtime_ns == stamp
    meta = json.loads((root / "dataset.json").read_text())["entries"]
    assert sorted(meta) == runs[:2] and all(e["world_size"] == 2 for e in meta.values())
    assert "2 skipped" in invoke("dataset", "build", sweep, "--out", root).stdout
    broken = Path(shutil.copytree(tiny, tmp_path / "broken" / "tiny"))  # its model fails at cap 3, in the run
    code = (broken / "define_model.py").read_text()
    (broken / "define_model.py").write_text(code.replace(
        "    torch.manual_seed(0)\n", "    torch.manual_seed(0)\n    if cap_size == 3:\n"
        "        raise RuntimeError('no model at cap 3')\n", 1))
    sweep.write_text(json.dumps({"inputs": [str(broken)], "grid": {"cap_size": [1, 3], "epochs": [1]},
                                 "profiler": "torch", "timeout": 120, "device": "cpu"}))
    third = invoke("dataset", "build", sweep, "--out", root)
    assert third.exit_code == 1
    assert "1 skipped, 1 failed" in third.stdout
    assert third.stderr.startswith("error: tiny-cap_size3_epochs1: ") and "no model at cap 3" in third.stderr
    sweep.write_text(json.dumps({"inputs": [str(tiny)], "grid": {"cap_size": [1, -3]}}))
    fourth = invoke("dataset", "build", sweep, "--out", root)  # refused whole, before anything runs
    assert fourth.exit_code == 2 and "grid: cap_size[1] must be a finite number above 0, got -3" in fourth.stderr


def test_entries_labelled_every_way_share_one_schema(invoke, tmp_path: Path) -> None:
    """A trace with no communication, a paired run, an in-run collection and a Kineto run: each labelled its own
    way, and the README's glob over data/ still reads them as one table, with the rows dataset.json records."""
    root = tmp_path / "ds"
    single_file = next((SINGLE_TRACE / "traces").glob("*.sqlite"))
    first = invoke("dataset", "add", root, single_file, INRUN_TRACE, RUNS / "gpt2-torch")
    second = invoke("dataset", "add", root, DDP_TRACE, "--baseline", SINGLE_TRACE)
    assert first.exit_code == second.exit_code == 0, first.stderr + second.stderr
    meta = json.loads((root / "dataset.json").read_text())["entries"]
    assert sorted(e["label_mode"] for e in meta.values()) == ["baseline", "detector", "detector", "inrun"]
    files = sorted((root / "data").rglob("*.parquet"))
    schemas = {f.name: pl.read_parquet_schema(f) for f in files}
    assert len(files) == 4 and all(s == schemas[files[0].name] for s in schemas.values()), schemas
    everything = pl.scan_parquet(str(root / "data" / "**" / "*.parquet")).collect()
    assert everything.height == sum(e["rows"] for e in meta.values())
    assert everything.filter(pl.col("baseline").is_null())["world_size"].null_count() > 0  # the lone trace


def test_an_in_run_collection_labels_itself(invoke, tmp_path: Path) -> None:
    """No baseline: the run's isolated steps are the reference; their own kernels are rows, not training."""
    root = tmp_path / "ds"
    result = invoke("dataset", "add", root, INRUN_TRACE)
    assert result.exit_code == 0, result.stderr
    (entry,) = json.loads((root / "dataset.json").read_text())["entries"].values()
    assert entry["label_mode"] == "inrun" and entry["baseline"] is None
    rows = pl.concat(entry_rows(root).values())
    want = detect(INRUN_TRACE).kernels
    assert rows["is_slowdown"].to_list() == want["is_slowdown"].to_list()
    assert {"step", "step_kind", "baseline_kind", "twin_key", "twin_pos"} <= set(rows.columns)
    (summary,) = json.loads(invoke("dataset", "summary", root, "--format", "json").stdout)
    assert summary["rows"] == rows.filter(pl.col("baseline_kind") != "reference").height < rows.height
    assert summary["cases"] == int(rows["is_slowdown"].sum()) > 100
    # add counted the rows as summary does: its table's row count is summary's, the reference's rows said apart
    line = next(x for x in result.stdout.splitlines() if " added " in x)
    assert f" {summary['rows']:,} " in line and f"{summary['cases']:,}" in line
    assert f"; and {rows.height - summary['rows']:,} rows" in line  # of isolated steps, folded on the next lines


def test_ctrl_c_stops_the_whole_build(tmp_path: Path) -> None:
    """A Ctrl-C during one configuration's collection ends the build (exit 130, one line): the next
    configuration is never started, the interrupted run's manifest says so."""
    pytest.importorskip("torch")
    from tests.collectors.test_collect import _variant
    from tests.collectors.test_interrupt import SLEEPY

    sweep = tmp_path / "sweep.json"
    sweep.write_text(json.dumps({"inputs": [str(_variant(tmp_path, model=SLEEPY))],
                                 "grid": {"cap_size": [1, 2], "epochs": [1]},
                                 "profiler": "torch", "timeout": 300, "device": "cpu"}))
    root = tmp_path / "ds"
    proc = subprocess.Popen([sys.executable, "-m", "traceql", "dataset", "build", str(sweep), "--out", str(root)],
                            cwd=ROOT, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.monotonic() + 120
        while len(list(root.glob("runs/*/training*"))) < 2:  # both ranks of the first configuration train
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert err.count("\n") == 1 and "interrupted (SIGINT)" in err, err
    runs = sorted(p.name for p in (root / "runs").iterdir())
    assert runs == ["input-cap_size1_epochs1"]  # neither the isolated run nor the second configuration
    manifest = json.loads((root / "runs" / runs[0] / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"
