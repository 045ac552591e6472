"""What the options change (continued): dataset add --model/--config, solve --max-accumulation/--max-virtual,
the global --quiet and the width COLUMNS gives."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from tests import profiles as synth
from tests.oracle import read_kernels
from tests.paths import DDP_FILE, ROOT, SINGLE_TRACE


def _json(result) -> dict:
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)



# --- dataset add --model/--config -----------------------------------------------------------------------------


def test_dataset_add_model_and_config_name_a_lone_traces_entry(invoke, tmp_path: Path) -> None:
    """A trace given alone has no manifest: ``--model``/``--config`` name its partition and its rows; without
    them, the trace's name and ``trace``. The rows are the same kernels either way (sqlite3's compute kernels)."""
    named, plain = tmp_path / "named", tmp_path / "plain"
    assert invoke("dataset", "add", named, DDP_FILE, "--model", "gpt2-small", "--config", "ws2-b8").exit_code == 0
    assert invoke("dataset", "add", plain, DDP_FILE).exit_code == 0
    [a] = (named / "data").rglob("*.parquet")
    [b] = (plain / "data").rglob("*.parquet")
    assert a.parent.relative_to(named / "data") == Path("model=gpt2-small/config=ws2-b8")
    assert b.parent.relative_to(plain / "data") == Path(f"model={DDP_FILE.stem}/config=trace")
    rows_a, rows_b = pl.read_parquet(a), pl.read_parquet(b)
    assert set(rows_a["model"].cast(str)) == {"gpt2-small"} and set(rows_a["config"].cast(str)) == {"ws2-b8"}
    assert set(rows_b["model"].cast(str)) == {DDP_FILE.stem} and set(rows_b["config"].cast(str)) == {"trace"}
    compute = sum(1 for k in read_kernels(DDP_FILE) if not k["comm"])
    assert rows_a.height == rows_b.height == compute
    assert rows_a.drop("model", "config", "entry_id").equals(rows_b.drop("model", "config", "entry_id"))
    summary = _json(invoke("dataset", "summary", named, "--format", "json"))
    assert [(s["model"], s["config"], s["rows"]) for s in summary] == [("gpt2-small", "ws2-b8", compute)]


# --- solve --max-accumulation/--max-virtual -------------------------------------------------------------------


def _candidates(data: dict) -> set[tuple]:
    return {(c["accumulation"], c["nodes"][0]["batch"], c["nodes"][0]["virtual_workers"], c["cap_mb"],
             c["iteration_ms"]) for c in [data["best"], *data["runner_ups"]]}


def _brute_force(n: int, gpus: int, max_acc: int, max_virtual: int) -> set[tuple]:
    """Every (accumulation, batch, virtual workers, cap, predicted ms) of one node of ``gpus`` fast synthetic
    GPUs (tests/profiles.py) reaching ``n`` samples, by the documented prediction: a × v × (forward + backward)
    + optimizer, plus the cap's exposed communication and tax (the last bucket's all-reduce where no trace
    measured them)."""
    memory, compute, buckets = synth.memory(synth.FAST, 8, {1: 8, 2: 4, 4: 2, 8: 1}), synth.compute(synth.FAST, 1.0), \
        synth.buckets()
    fits = {r["batch"]: r["virtual_workers"] for r in memory["batches"] if r["fits"]}
    times = {r["batch"]: r for r in compute["batches"]}
    comm = {c["cap_mb"]: c["exposed_comm_ms"] + c["overlap_tax_ms"] if c["exposed_comm_ms"] is not None
            else c["allreduce_ms"][-1] for c in buckets["caps"]}
    out = set()
    for b, workers in fits.items():
        for v in range(1, min(max_virtual, workers) + 1):
            for a in range(1, max_acc + 1):
                if a * gpus * v * b == n:
                    t = times[b]
                    for cap, ms in comm.items():
                        out.add((a, b, v, cap, a * v * (t["forward_ms"] + t["backward_ms"]) + t["optimizer_ms"] + ms))
    return out


@pytest.mark.parametrize("limits", [(), ("--max-accumulation", "1"), ("--max-virtual", "1"),
                                    ("--max-virtual", "8", "--max-accumulation", "2")], ids=" ".join)
def test_solve_limits_bound_the_candidates(invoke, tmp_path: Path, limits: tuple[str, ...]) -> None:
    """With room for every candidate (``--top 100``), solve lists exactly the configurations a brute force
    finds under the limits: ``--max-accumulation 1`` leaves none that accumulates, ``--max-virtual 1`` none
    with virtual workers (defaults 8 and 4)."""
    folder = synth.write(tmp_path / "profiles", synth.synthetic())
    cluster = synth.cluster(tmp_path / "cluster.json", ("node0", synth.FAST, 2))
    data = _json(invoke("solve", folder, "-n", "16", "-c", cluster, "--top", "100", "--format", "json", *limits))
    given = dict(zip(limits[::2], map(int, limits[1::2]), strict=True))
    max_acc, max_virtual = given.get("--max-accumulation", 8), given.get("--max-virtual", 4)
    assert (data["max_accumulation"], data["max_virtual"]) == (max_acc, max_virtual)
    want = _brute_force(16, 2, max_acc, max_virtual)
    assert _candidates(data) == want and len(want) < len(_brute_force(16, 2, 8, 8))
    times = [c["iteration_ms"] for c in [data["best"], *data["runner_ups"]]]
    assert times == sorted(times)


def test_solve_limits_choose_the_best_or_leave_nothing(invoke, tmp_path: Path) -> None:
    """24 samples on 2 GPUs where batch x virtual workers is at most 8: one step reaches 16 at most, so
    ``--max-accumulation 1`` leaves no configuration (exit 2); by default, and with ``--max-virtual 1``, the
    best is the brute force's by the documented order (time, then fewer accumulation steps, fewer replicas, the
    larger cap), and the limit changes it."""
    folder = synth.write(tmp_path / "profiles", synth.synthetic())
    cluster = synth.cluster(tmp_path / "cluster.json", ("node0", synth.FAST, 2))
    base = ("solve", folder, "-n", "24", "-c", cluster, "--format", "json")
    none = invoke(*base, "--max-accumulation", "1")
    assert none.exit_code == 2 and "no configuration reaches it exactly" in none.stderr
    assert "accumulation ≤ 1, virtual workers ≤ 4" in none.stderr and not _brute_force(24, 2, 1, 4)
    picked = {}
    for limits, max_virtual in (((), 4), (("--max-virtual", "1"), 1)):
        best = _json(invoke(*base, *limits))["best"]
        a, b, v, cap, ms = min(_brute_force(24, 2, 8, max_virtual), key=lambda c: (c[4], c[0], c[2], -c[3]))
        got = (best["accumulation"], best["nodes"][0]["batch"], best["nodes"][0]["virtual_workers"],
               best["cap_mb"], best["iteration_ms"])
        assert got == (a, b, v, cap, ms)
        picked[max_virtual] = got
    assert picked[1][2] == 1 < picked[4][2]


# --- the global options: --quiet, the width from COLUMNS ------------------------------------------------------


def _on_a_terminal(*args: str) -> tuple[int, bytes, bytes]:
    """``python -m traceql ARGS`` with stderr on a pseudo-terminal (progress is drawn only on a terminal) and
    stdout piped: (exit code, stdout, what the terminal got)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "traceql", *args], stdout=subprocess.PIPE, stderr=slave,
                            env={**os.environ, "COLUMNS": "80"}, cwd=ROOT)
    os.close(slave)
    got = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        got.append(chunk)
    out = proc.stdout.read()  # type: ignore[union-attr]
    proc.wait(timeout=120)
    os.close(master)
    return proc.returncode, out, b"".join(got)


def test_quiet_hides_the_progress_not_the_notes() -> None:
    """On a terminal ``ranks`` draws a progress bar on stderr; ``--quiet`` draws none; the notes are on stdout,
    the same either way."""
    code, out, err = _on_a_terminal("ranks", str(SINGLE_TRACE))
    qcode, qout, qerr = _on_a_terminal("--quiet", "ranks", str(SINGLE_TRACE))
    assert code == qcode == 0 and out == qout and out.startswith(b"note: ") and b"\nCauses of" in out
    assert "reading the ranks…".encode() in err and b"\x1b[" in err
    assert "reading the ranks…".encode() not in qerr and b"\x1b[?25l" not in qerr
    assert b"no communication kernels" in out and b"note: " not in err + qerr  # the notes are the output's


def test_tables_fit_the_width_columns_gives(invoke, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --wide, tables are laid out to COLUMNS: within 60 columns at 60, using more at 120, and every
    figure whole in both."""
    data = _json(invoke("info", "--format", "json"))
    widest = {}
    for columns in (60, 120):
        monkeypatch.setenv("COLUMNS", str(columns))
        result = invoke("info")
        assert result.exit_code == 0, result.stderr
        widest[columns] = max(map(len, result.stdout.splitlines()))
        assert widest[columns] <= columns and "…" not in result.stdout
        for k in data["top_kernels"]:
            assert f"{k['total_ns'] / 1e6:,.3f}" in result.stdout and f"{k['count']:,}" in result.stdout
    assert widest[120] > 60 >= widest[60] > 40
    monkeypatch.setenv("COLUMNS", "60")
    assert max(map(len, invoke("--wide", "info").stdout.splitlines())) > 120  # --wide: COLUMNS no longer binds
