"""On success stderr is empty: what traceql says about the data (``note:`` and ``warning:`` lines) is part of
the output, on stdout before it, and in ``--format json`` the JSON's ``"notes"`` alone. Each command is run as
a user runs it, in a process of its own at 80 columns, on shipped runs that carry notes of several kinds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from tests.paths import ROOT, RUNS, SINGLE_TRACE

# a rank's file alone (part of a larger job), a run the profiler slowed, a run without communication
NOTED = {
    "part": RUNS / "gpt2-4rank-nsys" / "traces" / "gpt2-4rank-nsys_rank0.sqlite",
    "slowed": RUNS / "resnet50-single-nsys",
    "single": SINGLE_TRACE,
}
SAID = {"part": "part of a larger job", "slowed": "the profiler slowed the run",
        "single": "no communication kernels", ("single", "collectives"): "none in the normal steps"}


def _run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "traceql", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, timeout=300, env={**os.environ, "COLUMNS": "80"})


@pytest.mark.parametrize("command", ["info", "detect", "ranks", "whatif", "collectives"])
@pytest.mark.parametrize("name", list(NOTED))
def test_notes_are_the_output_s(command: str, name: str) -> None:
    text = _run(command, NOTED[name])
    assert text.returncode == 0 and text.stderr == "", text.stderr
    said = " ".join(text.stdout.split())
    if command != "info":  # info reports the files, not the verdicts' caveats
        assert SAID.get((name, command), SAID[name]) in said, said[:600]
    assert max(len(line) for line in text.stdout.splitlines()) <= 80
    data = _run(command, NOTED[name], "--format", "json")
    assert data.returncode == 0 and data.stderr == "", data.stderr
    notes = json.loads(data.stdout)["notes"]  # the whole stdout is the JSON: the notes are inside it
    assert notes and SAID[name] in " ".join(notes) or command == "info" or (name, command) in SAID
    flat = "".join(text.stdout.split())  # folded at 80 columns: compared without the white space
    assert [n for n in notes if "".join(n.split()) not in flat] == []  # the same notes, in the text


def test_detect_says_what_it_wrote_beside_its_table_not_beside_its_json(tmp_path: Path) -> None:
    table = _run("detect", "--out", tmp_path / "k.parquet")
    assert table.returncode == 0 and table.stderr == ""
    rows = pl.read_parquet(tmp_path / "k.parquet").height
    assert f"wrote{rows:,}kernelrowsto{tmp_path / 'k.parquet'}" in "".join(table.stdout.split())  # folded
    data = _run("detect", "--out", tmp_path / "j.parquet", "--format", "json")
    assert data.returncode == 0 and data.stderr == "" and (tmp_path / "j.parquet").stat().st_size > 0
    json.loads(data.stdout)
