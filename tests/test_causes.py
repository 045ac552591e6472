"""The causes every verdict leads with (`detect`, `ranks`, `whatif`, the report, the API), on real runs whose
truth the collection recorded: a straggler injected by the collector (its rank, steps and sleep), or none."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

from tests.analyzers.test_stragglers import STRAGGLER_RUNS, injected
from tests.paths import RUNS
from traceql.commands.detect import detect
from traceql.commands.ranks import ranks
from traceql.commands.whatif import whatif

LLAMA = RUNS / "llama-4rank-straggler-nsys"


@pytest.mark.parametrize("run", STRAGGLER_RUNS, ids=lambda p: p.name)
def test_the_injected_straggler_is_the_largest_cause_everywhere(run: Path) -> None:
    """Its rank first, at about the sleep the collection injected in each step it held, the same in `detect`,
    `ranks` and `whatif`; contention, exposed communication and idle each far below it."""
    want, _ = injected(run)
    found = [detect(run).causes, ranks(run).causes, pl.DataFrame(whatif(run).runs[0].causes)]
    for causes in found:
        top = causes.row(0, named=True)
        assert (top["cause"], top["rank"], top["steps"]) == ("straggler", want["rank"], sorted(want["steps"]))
        assert top["step_cost_ns"] == pytest.approx(want["sleep_ms"] * 1e6, rel=0.1)
        assert (causes["cost_ns"].diff().drop_nulls() <= 0).all()  # largest first
        assert causes["cost_ns"][1] < top["cost_ns"] / 4
    assert found[0].equals(found[1]) and found[1].drop("run_id").equals(found[2].drop("run_id"))


def test_the_straggler_s_slowdowns_are_its_own() -> None:
    """On the Llama run (rank 3 asleep 30 ms before steps 2 and 4), the cases that ran on the waiting ranks
    while they waited for it are the straggler's, not contention's: no more than the time the other ranks lost
    in the steps it held (`detect`'s per-step figures), yet most of all the time the cases lost, while
    contention costs the steps little."""
    result = detect(LLAMA)
    (held,) = result.held.iter_rows(named=True)
    assert held["straggler"] == 3 and held["cases"] > 300
    assert held["lost_ns"] > 0.5 * result.time_lost_ns()
    in_held = result.steps.filter(pl.col("step").is_in([2, 4]) & (pl.col("rank") != 3))["time_lost_ns"].sum()
    assert held["lost_ns"] <= in_held
    contention = result.causes.filter(pl.col("cause") == "contention")["cost_ns"].item()
    assert contention < held["lost_ns"] / 20


def test_a_balanced_run_and_an_absorbed_sleep_have_no_straggler_cause() -> None:
    for run in (RUNS / "gpt2-balanced-nsys", RUNS / "gpt2-absorbed25-nsys"):
        causes = detect(run).causes
        assert "straggler" not in causes["cause"].to_list()
        assert set(causes["cause"]) == {"contention", "exposed communication", "idle"}


def test_the_report_s_first_line_names_the_largest_cause(tmp_path: Path) -> None:
    from traceql.commands.report import report

    out = tmp_path / "llama.html"
    report(LLAMA, output=out)
    lead = re.search(r"<p class='lead'>(.*?)</p>", out.read_text()).group(1)
    top = ranks(LLAMA).causes.row(0, named=True)
    assert lead.startswith(f"Largest cause: the straggler rank 3 costs {top['cost_ns'] / 1e6:,.1f} ms/step")
