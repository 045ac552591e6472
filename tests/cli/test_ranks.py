"""`traceql ranks` as a user runs it: the stragglers first with their evidence, every step of every rank with
every figure whole at 80 and 100 columns, the JSON form, --steps on a long capture, HTA's breakdown."""

from __future__ import annotations

import json

import pytest

from tests.paths import ROOT, RUNS, SHARED

FOUR = RUNS / "gpt2-4rank-straggler-nsys"
ORACLE = json.loads((ROOT / "tests" / "data" / "hta_oracle.json").read_text())["folders"]


def ms2(ns: float) -> str:
    return f"{ns / 1e6:,.2f}"


def test_stragglers_come_first_with_every_figure_whole(invoke, width: int) -> None:
    table = invoke("ranks", FOUR).stdout
    data = json.loads(invoke("ranks", FOUR, "--format", "json").stdout)
    assert "…" not in table and max(len(line) for line in table.splitlines()) <= width
    # the causes first, the straggler first among them, priced as the stragglers' table prices it
    causes = table.split("Stragglers of gpt2-4rank-straggler-nsys")[0]
    assert causes.startswith("Causes of gpt2-4rank-straggler-nsys, largest first:\n  1. the straggler rank 2 costs ")
    top = data["causes"][0]
    held = sum(s["cost_ns"] for s in data["stragglers"])
    assert top["cost_ns"] == pytest.approx(held / 4, abs=1) and f"{top['cost_ns'] / 1e6:,.1f} ms/step" in causes
    assert [{k: s[k] for k in ("rank", "step", "waiting_ranks")} for s in data["stragglers"]] == [
        {"rank": 2, "step": 2, "waiting_ranks": [0, 1, 3]}, {"rank": 2, "step": 4, "waiting_ranks": [0, 1, 3]}]
    lines = table.splitlines()
    for s in data["stragglers"]:
        row = [str(s["step"]), "2", ms2(s["cost_ns"]), ms2(s["step_ns"]), ms2(s["without_ns"]), ms2(s["held_ns"]),
               "0,1,3", "13", "of", "13"]
        assert any(line.split()[:10] == row for line in lines), row
        assert s["cost_ns"] == s["step_ns"] - s["without_ns"]
    assert len(data["steps"]) == 4 * 5  # every normal step of every rank
    first = min(r["step"] for r in data["steps"])
    for r in data["steps"]:
        figures = [ms2(r[c]) for c in ("cpu_ns", "gpu_ns", "compute_ns", "comm_ns", "memory_ns", "idle_ns",
                                       "exposed_comm_ns", "time_lost_ns")]
        step = f"{r['step']}*" if r["step"] == first else str(r["step"])  # the first captured: marked
        assert any(line.split()[:2] == [step, str(r["rank"])] and line.split()[2:10] == figures[:7] +
                   [f"{r['cases']:,}"] for line in lines), (r["step"], r["rank"])


def test_a_balanced_run_says_so(invoke) -> None:
    result = invoke("ranks")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("Causes of gpt2-nsys, largest first:") and "straggler rank" not in result.stdout
    assert "\nNo straggler in gpt2-nsys" in result.stdout
    assert json.loads(invoke("ranks", "--format", "json").stdout)["stragglers"] == []


def test_steps_keeps_the_longest(invoke) -> None:
    data = json.loads(invoke("ranks", FOUR, "--format", "json").stdout)
    longest = {}
    for r in data["steps"]:
        longest[r["step"]] = max(longest.get(r["step"], 0), r["gpu_ns"])
    want = sorted(sorted(longest, key=lambda s: (-longest[s], s))[:2])
    table = invoke("ranks", FOUR, "--steps", "2").stdout
    assert "The 2 longest of 5 steps of gpt2-4rank-straggler-nsys" in table
    steps_table = table.split("The 2 longest")[1].split("exposed:")[0]
    shown = {int(line.split()[0].rstrip("*")) for line in steps_table.splitlines() if len(line.split()) == 11
             and line.split()[0].rstrip("*").isdigit()}
    assert shown == set(want)


@pytest.mark.corpus
@pytest.mark.parametrize("folder", sorted(ORACLE))
def test_the_whole_capture_matches_hta(invoke, folder: str) -> None:
    """The per-rank breakdown of `ranks --hta-compat` against HTA 0.5.0's temporal breakdown: within 0.5 %."""
    result = invoke("ranks", SHARED / folder, "--hta-compat", "--format", "json")
    assert result.exit_code == 0, result.stderr
    ranks = {r["rank"]: r for r in json.loads(result.stdout)["ranks"]}
    assert sorted(ranks) == sorted(int(r) for r in ORACLE[folder])
    for rank, want in ORACLE[folder].items():
        got = ranks[int(rank)]
        for ours, theirs in (("idle_ns", "idle_us"), ("compute_ns", "compute_us"),
                             ("non_compute_ns", "non_compute_us"), ("span_ns", "kernel_time_us")):
            assert got[ours] / 1000 == pytest.approx(want[theirs], rel=0.005), (ours, rank)


def test_many_stragglers_keep_the_costliest(invoke) -> None:
    data = json.loads(invoke("ranks", FOUR, "--format", "json").stdout)
    costliest = max(data["stragglers"], key=lambda s: s["cost_ns"])
    table = invoke("ranks", FOUR, "--steps", "1").stdout
    assert "The 1 costliest of 2 stragglers of gpt2-4rank-straggler-nsys" in table
    shown = table.split("stragglers of")[1].split("cost:")[0]
    assert [line.split()[0] for line in shown.splitlines() if line.split() and line.split()[0].isdigit()] == [
        str(costliest["step"])]


def test_the_first_captured_step_is_starred_only_where_shown(invoke, narrow: int) -> None:
    """``--steps 2`` on the 5-step straggler run shows its two longest, steps 2 and 4: neither is the first
    captured step (step 1, the smallest ``step_<i>`` range of its exports, read with sqlite3), so neither is
    starred "not judged" and no footnote says so; with every step shown, step 1 alone is."""
    import re

    from tests.oracle import step_ranges

    run = RUNS / "gpt2-straggler-nsys"
    first = min(step for _, step, kind in step_ranges(run) if kind == "sync")
    two = invoke("ranks", run, "--steps", "2").stdout
    rows = re.findall(r"^ +(\d+)(\*?) +[01] ", two, re.M)
    assert {s for s, _ in rows} == {"2", "4"} and first == 1 and not any(star for _, star in rows), two
    assert "the first captured step" not in two
    every = invoke("ranks", run, "--steps", "5").stdout
    starred = {s for s, star in re.findall(r"^ +(\d+)(\*?) +[01] ", every, re.M) if star}
    assert starred == {str(first)} and "the first captured step" in " ".join(every.split()), every


def test_the_two_exposed_figures_say_which_is_which(invoke, narrow: int) -> None:
    """The embedded example: its steps table shows communication exposed a step (a time, 0.69-0.71 ms on each
    rank after the first step), its causes price exposed communication at 0.0 ms/step (a cost on the critical
    path): each says which it is, so the two do not read as a contradiction."""
    import re

    text = " ".join(invoke("ranks").stdout.split())
    cost = re.search(r"exposed communication costs ([\d.]+) ms/step", text)
    exposed = [float(m) for m in re.findall(r"^ +[2-5] +[01] +(?:[\d.]+ +){6}([\d.]+) ", invoke("ranks").stdout,
                                                                                      re.M)]
    assert cost and float(cost[1]) < min(exposed) and len(exposed) == 8, (cost, exposed)
    assert "a cost on the critical path, not the time it took" in text
    assert "exposed: comm with no compute alongside, its time (what it costs a step: the causes)" in text


def test_a_run_of_many_ranks_shows_each_step_once(invoke, narrow: int, tmp_path) -> None:
    """Twelve ranks (the 4-rank straggler run's exports, each read as three ranks): past 8 ranks the steps table
    shows each of its longest steps once, on the rank of its longest GPU time (the lowest on a tie), as the
    JSON's rows give them; ``--every-rank`` shows all twelve of each; the JSON holds every row either way."""
    import re
    import shutil

    for i in range(12):
        shutil.copyfile(FOUR / "traces" / f"gpt2-4rank-straggler-nsys_rank{i % 4}.sqlite",
                        tmp_path / f"twelve_rank{i}.sqlite")
    text = invoke("ranks", tmp_path, "--steps", "3").stdout
    data = json.loads(invoke("ranks", tmp_path, "--format", "json").stdout)
    assert len(data["steps"]) == 12 * 5
    by_step: dict[int, list[dict]] = {}
    for r in data["steps"]:
        by_step.setdefault(r["step"], []).append(r)
    top = max(by_step.values(), key=lambda rows: max(r["gpu_ns"] for r in rows))
    longest = sorted(sorted(by_step, key=lambda s: (-max(r["gpu_ns"] for r in by_step[s]), s))[:3])
    want = [(s, min(by_step[s], key=lambda r: (-r["gpu_ns"], r["rank"]))) for s in longest]
    assert "of its 12 ranks, the one of longest GPU time (--every-rank: all)" in " ".join(text.split()), text
    rows = re.findall(r"^ +(\d+)\*? +(\d+) +([\d,.]+) +([\d,.]+) ", text, re.M)
    steps_rows = [(int(s), int(rank), gpu) for s, rank, _, gpu in rows][:3]
    assert steps_rows == [(s, r["rank"], ms2(r["gpu_ns"])) for s, r in want], text
    assert len(top) == 12 and max(len(line) for line in text.splitlines()) <= 80
    every = invoke("ranks", tmp_path, "--steps", "3", "--every-rank").stdout
    assert "--every-rank: all" not in every
    shown = {(int(s), int(r)) for s, r in re.findall(r"^ +(\d+)\*? +(\d+) +[\d,.]+ +[\d,.]+ +[\d,.]+ +[\d,.]+ +"
                                                         r"[\d,.]+ +[\d,.]+ +[\d,.]+ +[\d,]+ +[\d,.]+$", every, re.M)}
    assert shown == {(s, r) for s in longest for r in range(12)}
    from traceql.analyzers.shown import RANKS_SHOWN

    told = " ".join(invoke("ranks", "--help").stdout.replace("│", " ").split())
    assert f"(a run of more than {RANKS_SHOWN} ranks: each step's slowest)" in told
