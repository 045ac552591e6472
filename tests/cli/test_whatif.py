"""`traceql whatif` as a user runs it: the table whole at 80 and 100 columns, its figures those of the JSON
form, the verdict a finding a line, --steps."""

from __future__ import annotations

import json

import polars as pl

from tests.paths import ROOT, RUNS


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
    verdict = table.stdout.split("Verdict for gpt2-straggler-nsys:\n")[1]
    assert verdict.startswith("  the straggler rank 1 costs ")  # the largest cause first
    assert "; 29.7 ms in steps 2, 4)" in data["runs"][0]["verdict"]  # on H200: no interval (none validated)
    causes = data["runs"][0]["causes"]
    assert [c["cause"] for c in causes][0] == "straggler" and all(
        f"  {c['cause'] if c['cause'] != 'straggler' else 'the straggler rank 1'} costs {c['cost_ns'] / 1e6:,.1f} "
        "ms/step" in verdict for c in causes)


def test_steps_keeps_the_longest(invoke) -> None:
    out = invoke("whatif", RUNS / "gpt2-straggler-nsys", "--steps", "2").stdout
    assert "the 2 longest of its steps" in out
    shown = [line.split()[0] for line in out.splitlines() if line.split() and line.split()[0].rstrip("*").isdigit()]
    assert shown == ["2", "4"]  # the straggler's steps are the longest


def test_whatif_at_another_cap_as_a_user_runs_it(invoke, narrow: int, tmp_path) -> None:
    """The shipped Llama run at 25 MB on 4 H200s priced at 2 MB: a column and a verdict line that fit 80 columns,
    the JSON's figures the table's, within 3 % of the shipped run at 2 MB."""
    args = ["whatif", RUNS / "llama-4rank-cap25-nsys", "--bucket-cap", "2", "--gradients",
            ROOT / "datasets" / "examples" / "llama" / "gradients.json"]
    table = invoke(*args)
    assert table.exit_code == 0, table.stderr
    assert max(len(line) for line in table.stdout.splitlines()) <= narrow and "2 MB cap" in table.stdout
    assert "  at 2 MB buckets (42 buckets, not 10): " in table.stdout
    said = " ".join(table.stdout.split())  # H200 runs were validated launch-bound only
    assert "This run (H200, GPU-bound: GPUs idle" in said and "no configuration of its class was validated" in said
    data = json.loads(invoke(*args, "--format", "json").stdout)
    steps = pl.DataFrame(data["steps"]).filter(~pl.col("first"))
    for s in steps.iter_rows(named=True):
        assert any(line.split()[0] == str(s["step"]) and line.split()[-1] == f"{s['bucket_cap_ns'] / 1e6:,.2f}"
                   for line in table.stdout.splitlines() if line.split())
    real = json.loads(invoke("whatif", RUNS / "llama-4rank-cap2-nsys", "--format", "json").stdout)
    real_ns = pl.DataFrame(real["steps"]).filter(~pl.col("first"))["measured_ns"].median()
    assert abs(steps["bucket_cap_ns"].median() - real_ns) / real_ns < 0.03
    missing = invoke("whatif", RUNS / "gpt2-straggler-nsys", "--bucket-cap", "2")
    assert missing.exit_code == 2 and missing.stderr.count("\n") == 1 and "--gradients FILE" in missing.stderr
    bad = tmp_path / "gradients.json"
    bad.write_text('{"param_bytes": "many"}')
    refused = invoke("whatif", RUNS / "llama-4rank-cap25-nsys", "--bucket-cap", "2", "--gradients", bad)
    assert refused.exit_code == 2 and refused.stderr.count("\n") == 1
    assert f"{bad}: param_bytes must be a list of byte counts above 0" in refused.stderr


def test_a_trace_without_steps_says_so_once(invoke, narrow: int, tmp_path) -> None:
    """The embedded single-GPU export with its NVTX ranges removed: its verdict says there is no step to
    replay, once, and no line tells of a replay (it printed that twice, then "replayed 4,9xx GPU activities")."""
    import shutil
    import sqlite3

    from tests.paths import SINGLE_FILE

    bare = tmp_path / "bare.sqlite"
    shutil.copyfile(SINGLE_FILE, bare)
    with sqlite3.connect(bare) as db:
        db.execute("DELETE FROM NVTX_EVENTS")
    result = invoke("whatif", bare)
    assert result.exit_code == 0, result.stderr
    text = result.stdout + result.stderr
    assert text.count("no steps to replay") == 1 and "no step ranges" not in text, text
    assert "replayed" not in text and "What if" not in text, text
    assert json.loads(invoke("whatif", bare, "--format", "json").stdout)["graph"]["activities"] > 0


def test_help_names_every_column_of_the_table(invoke, narrow: int, tmp_path) -> None:
    """Every column header the table prints (with --bucket-cap too) is named and said in --help."""
    import re

    table = invoke("whatif", "--bucket-cap", "2", "--gradients", ROOT / "datasets" / "examples" / "gpt2" /
                   "gradients.json").stdout
    header = next(line for line in table.splitlines() if line.startswith("step "))
    columns = [c for c in re.split(r"\s{2,}", header.strip()) if c != "step"]
    assert columns[:5] == ["measured", "replayed", "no straggler", "no contention", "serialized"], columns
    said = " ".join(invoke("whatif", "--help").stdout.replace("│", " ").split())
    for column in ["measured", "replayed", "no straggler", "no contention", "serialized", "MB cap"]:
        assert f"{column} (" in said, column
