"""`traceql diff` as a user runs it: a run against itself, the shared GPT-2 pair (bucket cap 25 MB vs 2 MB)
checked against sqlite3, --fail-above's exit code, the 80-column table and bad input."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from tests.oracle import count, exports, nsys_steps, rows
from tests.paths import DDP_FILE, DDP_TRACE, NSYS, RUNS

CAP25, CAP2 = NSYS / "gpt2_ddp2_cap25.sqlite", NSYS / "gpt2_ddp2_cap2.sqlite"
KEYS = {"before", "after", "step_time", "ranks", "kernels", "kernel_totals", "new", "removed", "verdict", "notes"}


def run_step_ns(path: Path) -> list[int]:
    """Per normal step of the run, in step order, the longest of its processes' first start to last end of what
    the step launched (kernels, copies, sets), each row placed in its step by its runtime call, with sqlite3;
    the run's first captured step left out."""
    spans: dict[tuple, list[int]] = defaultdict(list)
    first = None
    for table in ("KERNEL", "MEMCPY", "MEMSET"):
        where = nsys_steps(path, f"CUPTI_ACTIVITY_KIND_{table}")
        numbers = [s[0] for s in where.values() if s is not None]
        first = min([*numbers, *([first] if first is not None else [])], default=first)
        for f in exports(path):
            for pid, corr, start, end in rows(f, f'SELECT (globalPid >> 24) & 16777215, correlationId, start, '
                                                 f'"end" FROM CUPTI_ACTIVITY_KIND_{table}'):
                step = where.get((pid, corr))
                if step is not None and step[1] == "sync":
                    spans[(pid, step[0])] += [start, end]
    per_step: dict[int, int] = {}
    for (_, step), stamps in spans.items():
        per_step[step] = max(per_step.get(step, 0), max(stamps) - min(stamps))
    return [per_step[k] for k in sorted(per_step) if k != first or len(per_step) == 1]


def mean_and_p90(times: list[int]) -> tuple[float, float]:
    """The mean, and the 90th percentile between the nearest ranks (numpy's linear)."""
    import numpy as np

    return float(np.mean(times)), float(np.quantile(times, 0.9))


def test_a_run_against_itself_is_no_change(invoke, narrow) -> None:
    result = invoke("diff", DDP_TRACE, DDP_TRACE, "--fail-above", "0.5")
    assert result.exit_code == 0, result.stderr
    assert ("verdict: step time mean +0.00 %, p90 +0.00 % (the same; tolerance ±2 %): no change"
            in " ".join(result.stdout.split()))
    assert "new in after: 0 (0.000 ms); removed: 0 (0.000 ms)" in " ".join(result.stdout.split())
    data = json.loads(invoke("diff", DDP_TRACE, DDP_TRACE, "--format", "json").stdout)
    assert data["verdict"] == {"verdict": "no change", "change_pct": 0.0, "p90_change_pct": 0.0, "tolerance_pct": 2.0}
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
    (before, p90_before), (after, p90_after) = mean_and_p90(run_step_ns(CAP25)), mean_and_p90(run_step_ns(CAP2))
    st = data["step_time"]
    assert (st["before_ns"], st["after_ns"], st["basis"]) == (pytest.approx(before), pytest.approx(after), "step")
    assert (st["p90_before_ns"], st["p90_after_ns"]) == (pytest.approx(p90_before), pytest.approx(p90_after))
    assert (st["steps_before"], st["steps_after"]) == (9, 9)  # 10 normal steps, the first left out
    assert st["change_pct"] == pytest.approx(100 * (after - before) / before, abs=1e-3)
    assert st["p90_change_pct"] == pytest.approx(100 * (p90_after - p90_before) / p90_before, abs=1e-3)
    assert data["verdict"]["verdict"] == "no change"  # -0.66 %, p90 -0.80 %: within the ±2 % tolerance
    assert data["before"]["steps"] == data["after"]["steps"] == 10 and [r["rank"] for r in data["ranks"]] == [0, 1]
    # both runs launch the same kernels in every step: all pair, none new or removed
    compute = count(CAP2, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName "
                          "WHERE s.value NOT LIKE 'nccl%'")
    assert data["kernel_totals"]["paired"] == compute and data["new"] == data["removed"] == []
    # each run is labelled as `detect` labels it; the per-rank figures are per normal step (10 a rank)
    for side, path in (("before", CAP25), ("after", CAP2)):
        detected = json.loads(invoke("detect", path, "--format", "json").stdout)
        assert [r[f"cases_{side}"] for r in data["ranks"]] == [pytest.approx(r["cases"] / 10)
                                                              for r in detected["ranks"]]
        assert data[side]["mode"] == detected["mode"] == "detector"


@pytest.mark.corpus
@pytest.mark.parametrize("args,code", [((CAP2, CAP25, "--fail-above", "0.7"), 1),  # p90 +0.81 %: above 0.7
                                       ((CAP2, CAP25, "--fail-above", "2"), 0),
                                       ((CAP25, CAP2, "--fail-above", "0"), 0),  # -0.66 %, p90 -0.80 %: faster
                                       ((CAP25, CAP2, "--fail-above", "-2"), 1)])  # not 2 % faster
def test_fail_above_is_exit_1_above_the_threshold(invoke, args: tuple, code: int) -> None:
    result = invoke("diff", *args)
    assert result.exit_code == code, result.stderr
    assert "verdict: step time" in result.stdout
    if code:
        assert result.stderr.count("\n") == 1 and "above --fail-above" in result.stderr


def test_tolerance_moves_the_verdict_around_the_change(invoke) -> None:
    """Rank 0 of the embedded run (cap 25 MB) against rank 0 of the cap 2 MB in-run collection: the verdict is
    ``no change`` within ±``--tolerance`` of the mean step time's change (sqlite3's) where the tail moved less,
    else the change's direction; ``--fail-above`` below the change fails either way (the tolerance does not
    move it)."""
    after = next((RUNS / "gpt2-cap2-inrun-nsys" / "traces").glob("*_rank0.sqlite"))
    (before_ns, p90_before), (after_ns, p90_after) = mean_and_p90(run_step_ns(DDP_FILE)), \
        mean_and_p90(run_step_ns(after))
    change = 100 * (after_ns - before_ns) / before_ns
    assert abs(100 * (p90_after - p90_before) / p90_before) < abs(change)  # the mean's change decides
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
    assert ("verdict: step time mean -0.66 %, p90 -0.80 % (after is faster; tolerance ±2 %): no change"
            in " ".join(out.split()))


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


@pytest.mark.parametrize("balanced,straggler", [("gpt2-4rank-nsys", "gpt2-4rank-straggler-nsys"),
                                                ("gpt2-torch", "gpt2-straggler-torch"),
                                                ("llama-4rank-cap25-nsys", "llama-4rank-straggler-nsys")])
def test_a_straggler_regression_fails_the_gate(invoke, balanced: str, straggler: str) -> None:
    """A rank that slept 30 ms before two of the five steps: the median step hides it, the mean and the tail
    do not. The step times are sqlite3's where the runs are nsys exports."""
    result = invoke("diff", RUNS / balanced, RUNS / straggler, "--fail-above", "3", "--format", "json")
    assert result.exit_code == 1 and "above --fail-above 3 %" in result.stderr
    st = json.loads(result.stdout)["step_time"]
    assert st["change_pct"] > 10 and st["p90_change_pct"] > 20
    if balanced.endswith("nsys"):
        (before, p90_before), (after, p90_after) = (mean_and_p90(run_step_ns(RUNS / n)) for n in (balanced, straggler))
        assert (st["before_ns"], st["after_ns"]) == (pytest.approx(before), pytest.approx(after))
        assert (st["p90_before_ns"], st["p90_after_ns"]) == (pytest.approx(p90_before), pytest.approx(p90_after))


def test_the_gate_passes_runs_without_a_regression(invoke) -> None:
    """The 4-GPU GPT-2 run at 25 MB buckets against the same at 2 MB: -0.35 %, p90 -0.10 %."""
    result = invoke("diff", RUNS / "gpt2-4rank-nsys", RUNS / "gpt2-4rank-cap2-nsys", "--fail-above", "3")
    assert result.exit_code == 0, result.stderr
    assert "): no change" in " ".join(result.stdout.split())


def test_a_sleep_the_gpu_absorbed_passes_the_gate_and_the_same_sleep_at_the_step_s_start_fails_it(invoke) -> None:
    """Three GPT-2 runs of one session on 2 × H100: rank 1 slept 25 ms after its backward in steps 2 and 4,
    while its GPU still ran the work the backward queued (absorbed: no rank waited), and, in another run, 10 ms
    at the start of those steps (its GPU idle, the other rank waiting). The gate fails on the second alone, and
    `ranks` names a straggler there alone."""
    from traceql.commands.ranks import ranks

    absorbed = invoke("diff", RUNS / "gpt2-balanced-nsys", RUNS / "gpt2-absorbed25-nsys", "--fail-above", "3",
                      "--format", "json")
    assert absorbed.exit_code == 0, absorbed.stderr
    assert abs(json.loads(absorbed.stdout)["step_time"]["change_pct"]) < 2
    late = invoke("diff", RUNS / "gpt2-balanced-nsys", RUNS / "gpt2-late-nsys", "--fail-above", "3", "--format",
                  "json")
    assert late.exit_code == 1 and json.loads(late.stdout)["step_time"]["p90_change_pct"] > 5
    assert ranks(RUNS / "gpt2-absorbed25-nsys").stragglers.is_empty()
    named = ranks(RUNS / "gpt2-late-nsys").stragglers
    assert named["rank"].to_list() == [1, 1] and named["step"].to_list() == [2, 4]


def test_the_sides_count_each_step_once(invoke, narrow: int) -> None:
    """A 4-rank run of 5 steps is "4 ranks, 5 steps" (it said 20: its steps counted once a rank); the oracle is
    the step ranges of rank 0's export, read with sqlite3."""
    from tests.oracle import step_ranges

    before, after = RUNS / "gpt2-4rank-nsys", RUNS / "gpt2-4rank-straggler-nsys"
    rank0 = next((before / "traces").glob("*rank0.sqlite"))
    steps = {step for _, step, kind in step_ranges(rank0) if kind == "sync"}
    result = invoke("diff", before, after)
    assert result.exit_code == 0, result.stderr
    text = " ".join(result.stdout.split())  # the lines fold at 80 columns
    assert text.count(f"(in-run labels, 4 ranks, {len(steps)} steps)") == 2 and len(steps) == 5, text


def test_fail_above_reads_the_tail_too(invoke) -> None:
    """The 4-rank run against its straggler twin: the mean step regressed about half as much as the slowest
    tenth. The oracle: each normal step's longest rank GPU extent from sqlite3 (``tests.oracle``), the first
    captured step left out. A threshold between the mean's and the 90th percentile's change fails (exit 1);
    one above both passes."""
    import numpy as np

    from tests.oracle import step_gpu_extents

    def steps(run: Path) -> list[int]:
        longest: dict[int, int] = {}
        for (_, step, kind), (start, end) in step_gpu_extents(run).items():
            if kind == "sync":
                longest[step] = max(longest.get(step, 0), end - start)
        return [longest[s] for s in sorted(longest)[1:]]

    before, after = RUNS / "gpt2-4rank-nsys", RUNS / "gpt2-4rank-straggler-nsys"
    b, a = steps(before), steps(after)
    mean = 100 * (np.mean(a) / np.mean(b) - 1)
    tail = 100 * (np.percentile(a, 90) / np.percentile(b, 90) - 1)
    assert len(a) == len(b) == 4 and tail > mean + 10, (mean, tail)
    between = invoke("diff", before, after, "--fail-above", f"{(mean + tail) / 2:.2f}")
    assert between.exit_code == 1 and "above --fail-above" in between.stderr, between.stderr
    assert invoke("diff", before, after, "--fail-above", f"{tail + 5:.2f}").exit_code == 0


def test_one_rank_a_side_with_other_numbers_pairs_them(invoke, narrow: int) -> None:
    """Rank 0's export of the embedded run against rank 1's: the sides share no rank number (as HTA's trace_diff
    traces, rank 3 against rank 1), so nothing paired and every kernel of AFTER was "new". Now they pair in
    order, the note says so, and as two ranks of one DDP step their kernels pair (the oracle: each export's
    compute kernels of its normal steps, counted with sqlite3, nearly all of AFTER's paired)."""
    from tests.paths import DDP_FILES

    before, after = DDP_FILES
    result = json.loads(invoke("diff", before, after, "--format", "json").stdout)
    assert any("compared in order (0 with 1)" in n for n in result["notes"]), result["notes"]
    assert not any("only in" in n for n in result["notes"]), result["notes"]
    assert [r["rank"] for r in result["ranks"]] == [0]
    assert result["ranks"][0]["compute_ns_after"] is not None and result["ranks"][0]["compute_ns_before"] is not None
    totals = result["kernel_totals"]
    assert totals["paired"] > 0.9 * (totals["paired"] + totals["new"]), totals
    assert result["verdict"]["verdict"] in ("no change", "improved", "regressed")


def test_runs_without_steps_get_no_verdict(invoke, narrow: int, tmp_path: Path) -> None:
    """The embedded single-GPU export with its NVTX ranges removed, against the same with a few ranges kept:
    neither has steps, so each side's span is its capture's, which says nothing of the work in it: the verdict
    is unknown (it said "no change" on nsys-ai's fixed 300 ms captures while compute fell 10 %), and
    --fail-above cannot pass a run it could not judge (exit 1, one line)."""
    import shutil
    import sqlite3

    from tests.paths import SINGLE_FILE

    bare = tmp_path / "bare.sqlite"
    shutil.copyfile(SINGLE_FILE, bare)
    with sqlite3.connect(bare) as db:
        db.execute("DELETE FROM NVTX_EVENTS")
    result = invoke("diff", bare, bare)
    assert result.exit_code == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "verdict: no normal steps: the spans time the captures, not the work: unknown" in text, text
    assert "no change" not in text
    assert json.loads(invoke("diff", bare, bare, "--format", "json").stdout)["verdict"]["verdict"] == "unknown"
    gated = invoke("diff", bare, bare, "--fail-above", "5")
    errors = [line for line in gated.stderr.splitlines() if line.startswith("error:")]
    assert gated.exit_code == 1 and len(errors) == 1 and "no step time to judge" in errors[0], gated.stderr


@pytest.mark.corpus
def test_htas_trace_diff_pairs_its_two_ranks(invoke, narrow: int) -> None:
    """HTA's trace_diff: control holds rank 3, test rank 1 of another job; they pair in order."""
    from tests.paths import PUBLIC

    base = PUBLIC / "hta-kineto" / "trace_diff"
    result = json.loads(invoke("diff", base / "control", base / "test", "--format", "json").stdout)
    assert any("compared in order (3 with 1)" in n for n in result["notes"]), result["notes"]
    assert result["kernel_totals"]["paired"] > 0
