"""`traceql diff` as a user runs it: a run against itself, the shared GPT-2 pair (bucket cap 25 MB vs 2 MB)
checked against sqlite3, --fail-above's exit code, the 80-column table and bad input."""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path

import pytest

from tests.oracle import count, nsys_steps, rows
from tests.paths import DDP_FILE, DDP_TRACE, NSYS, RUNS

CAP25, CAP2 = NSYS / "gpt2_ddp2_cap25.sqlite", NSYS / "gpt2_ddp2_cap2.sqlite"
KEYS = {"before", "after", "step_time", "ranks", "kernels", "kernel_totals", "new", "removed", "verdict", "notes"}


def median_step_ns(path: Path) -> float:
    """The median over processes and normal steps of first start to last end of what the step launched
    (kernels, copies, sets), each row placed in its step by its runtime call, with sqlite3."""
    spans: dict[tuple, list[int]] = defaultdict(list)
    for table in ("KERNEL", "MEMCPY", "MEMSET"):
        where = nsys_steps(path, f"CUPTI_ACTIVITY_KIND_{table}")
        for pid, corr, start, end in rows(path, f'SELECT (globalPid >> 24) & 16777215, correlationId, start, "end" '
                                                f"FROM CUPTI_ACTIVITY_KIND_{table}"):
            step = where.get((pid, corr))
            if step is not None and step[1] == "sync":
                spans[(pid, step[0])] += [start, end]
    return statistics.median(max(v) - min(v) for v in spans.values())


def test_a_run_against_itself_is_no_change(invoke, narrow) -> None:
    result = invoke("diff", DDP_TRACE, DDP_TRACE, "--fail-above", "0.5")
    assert result.exit_code == 0, result.stderr
    assert "verdict: step time +0.00 % (the same; tolerance ±2 %): no change" in result.stdout
    assert "new in after: 0 (0.000 ms); removed: 0 (0.000 ms)" in " ".join(result.stdout.split())
    data = json.loads(invoke("diff", DDP_TRACE, DDP_TRACE, "--format", "json").stdout)
    assert data["verdict"] == {"verdict": "no change", "change_pct": 0.0, "tolerance_pct": 2.0}
    assert data["new"] == data["removed"] == [] and all(k["delta_ns"] == 0 for k in data["kernels"])
    assert data["kernel_totals"]["paired"] == data["before"]["compute_kernels"]
    for r in data["ranks"]:
        assert all(r[f"{c}_before"] == r[f"{c}_after"] for c in ("compute_ns", "comm_ns", "idle_ns", "cases"))


@pytest.mark.corpus
def test_the_bucket_cap_pair_against_sqlite(invoke) -> None:
    result = invoke("diff", CAP25, CAP2, "--format", "json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert set(data) == KEYS
    before, after = median_step_ns(CAP25), median_step_ns(CAP2)
    st = data["step_time"]
    assert (st["before_ns"], st["after_ns"], st["basis"]) == (before, after, "step")
    assert st["change_pct"] == pytest.approx(100 * (after - before) / before, abs=1e-3)
    assert data["verdict"]["verdict"] == "no change"  # -1.05 %: within the ±2 % tolerance
    assert data["before"]["steps"] == data["after"]["steps"] == 20 and [r["rank"] for r in data["ranks"]] == [0, 1]
    # both runs launch the same kernels in every step: all pair, none new or removed
    compute = count(CAP2, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName "
                          "WHERE s.value NOT LIKE 'nccl%'")
    assert data["kernel_totals"]["paired"] == compute and data["new"] == data["removed"] == []
    # each run is labelled as `detect` labels it
    for side, path in (("before", CAP25), ("after", CAP2)):
        detected = json.loads(invoke("detect", path, "--format", "json").stdout)
        assert [r[f"cases_{side}"] for r in data["ranks"]] == [r["cases"] for r in detected["ranks"]]
        assert data[side]["mode"] == detected["mode"] == "detector"


@pytest.mark.corpus
@pytest.mark.parametrize("args,code", [((CAP2, CAP25, "--fail-above", "0.5"), 1),  # +1.06 %: above 0.5
                                       ((CAP2, CAP25, "--fail-above", "2"), 0),
                                       ((CAP25, CAP2, "--fail-above", "0"), 0),  # -1.05 %: faster
                                       ((CAP25, CAP2, "--fail-above", "-2"), 1)])  # not 2 % faster
def test_fail_above_is_exit_1_above_the_threshold(invoke, args: tuple, code: int) -> None:
    result = invoke("diff", *args)
    assert result.exit_code == code, result.stderr
    assert "verdict: step time" in result.stdout
    if code:
        assert result.stderr.count("\n") == 1 and "above --fail-above" in result.stderr


def test_tolerance_moves_the_verdict_around_the_change(invoke) -> None:
    """Rank 0 of the embedded run (cap 25 MB) against rank 0 of the cap 2 MB in-run collection: the verdict is
    ``no change`` within ±``--tolerance`` of the median step time's change (sqlite3's), else the change's
    direction; ``--fail-above`` below the change fails either way (the tolerance does not move it)."""
    after = next((RUNS / "gpt2-cap2-inrun-nsys" / "traces").glob("*_rank0.sqlite"))
    before_ns, after_ns = median_step_ns(DDP_FILE), median_step_ns(after)
    change = 100 * (after_ns - before_ns) / before_ns
    assert abs(change) > 0.01  # a change to be within or beyond
    direction = "improved" if change < 0 else "regressed"
    for tolerance, verdict in ((abs(change) / 2, direction), (abs(change) * 2, "no change")):
        result = invoke("diff", DDP_FILE, after, "--tolerance", f"{tolerance:.4f}", "--format", "json",
                        "--fail-above", f"{change - abs(change) / 2:.4f}")
        assert result.exit_code == 1 and "above --fail-above" in result.stderr
        data = json.loads(result.stdout)
        assert data["step_time"]["change_pct"] == pytest.approx(change, abs=1e-3)
        assert data["verdict"]["verdict"] == verdict
        assert data["verdict"]["tolerance_pct"] == pytest.approx(tolerance, abs=1e-4)


@pytest.mark.corpus
def test_table_fits_80_columns(invoke, narrow) -> None:
    out = invoke("diff", CAP25, CAP2, "--top", "5").stdout
    assert "…" not in out and max(map(len, out.splitlines())) <= 80
    data = json.loads(invoke("diff", CAP25, CAP2, "--format", "json").stdout)
    for k in data["kernels"][:5]:
        assert f"{k['instances']:,}" in out and f"{k['delta_ns'] / 1e6:,.3f}" in out
    assert "verdict: step time -1.05 % (after is faster; tolerance ±2 %): no change" in out


def test_bad_input_is_one_line(invoke, tmp_path: Path) -> None:
    bad = tmp_path / "report.sqlite"
    bad.write_text("this is a text file, not a trace\n")
    for args in ((bad, DDP_TRACE), (DDP_TRACE, bad)):
        result = invoke("diff", *args)
        assert result.exit_code == 2 and result.stdout == ""  # unreadable input
        assert result.stderr.count("\n") == 1 and result.stderr.startswith(f"error: {bad}:"), result.stderr


@pytest.mark.corpus
def test_a_folder_of_several_runs_is_refused(invoke) -> None:
    result = invoke("diff", NSYS, CAP2)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"error: {NSYS}: holds 6 runs") and "one run on each side" in result.stderr
