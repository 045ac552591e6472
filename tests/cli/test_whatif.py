"""`traceql whatif` as a user runs it: the table whole at 80 and 100 columns, its figures those of the JSON
form, the verdict a finding a line, --steps."""

from __future__ import annotations

import json

from tests.paths import RUNS


def test_whatif_as_a_user_runs_it(invoke, width: int) -> None:
    run = RUNS / "gpt2-straggler-nsys"
    table = invoke("whatif", run)
    data = json.loads(invoke("whatif", run, "--format", "json").stdout)
    assert table.exit_code == 0, table.stderr
    assert "…" not in table.stdout and max(len(line) for line in table.stdout.splitlines()) <= width
    assert set(data) == {"steps", "runs", "graph", "notes", "measured"}
    keys = {"run_id", "step", "measured_ns", "replayed_ns", "without_straggler_ns", "without_contention_ns",
            "serialized_ns"}
    assert all(keys <= set(s) for s in data["steps"]) and len(data["steps"]) == 5
    lines = table.stdout.splitlines()
    for s in data["steps"]:
        cells = [f"{s['step']}{'*' if s['first'] else ''}",
                 *(f"{s[k] / 1e6:,.2f}" for k in ("measured_ns", "replayed_ns", "without_straggler_ns"))]
        assert any(line.split()[:4] == cells for line in lines), cells
    assert "  the straggler rank 1 costs " in table.stdout
    assert data["runs"][0]["verdict"].endswith("in steps 2, 4")


def test_steps_keeps_the_longest(invoke) -> None:
    out = invoke("whatif", RUNS / "gpt2-straggler-nsys", "--steps", "2").stdout
    assert "the 2 longest of its steps" in out
    shown = [line.split()[0] for line in out.splitlines() if line.split() and line.split()[0].rstrip("*").isdigit()]
    assert shown == ["2", "4"]  # the straggler's steps are the longest
