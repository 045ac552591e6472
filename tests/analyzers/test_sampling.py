"""A long run's causes priced from a sample of its steps (``replay.sampling``), checked against the replay of
every step: shipped runs made 30 times longer in time (``bench/scaled.py``: 150 steps), replayed a step a
window, once whole and once sampled (every straggler's window, the first and last, a random 20 steps of
the others). A straggler's cost is exact; the others' fall within their stated 95 % error of the full
replay's (or within 10 us, under the 0.1 ms the verdict shows) for most causes, as a 95 % interval should."""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl
import pytest

from tests.paths import ROOT, RUNS
from traceql.analyzers import replay
from traceql.analyzers.causes import ranking, sentence
from traceql.analyzers.replay import sampling, windows
from traceql.analyzers.replay.activities import activities, on_clock, with_labels
from traceql.labelling.request import request
from traceql.verdicts.pricing import WAYS, critical_of, named_stragglers

SCALED = ("gpt2-straggler-nsys", "llama-4rank-cap2-nsys", "gpt2-4rank-straggler-nsys")
TOLERANCE_NS = 10_000


@pytest.fixture(scope="module")
def longer(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from scaled import run_period, scale_nsys
    finally:
        sys.path.pop(0)
    out = {}
    for name in SCALED:
        files = sorted((RUNS / name / "traces").glob("*.sqlite"))
        folder = tmp_path_factory.mktemp(name)
        period = run_period(files)
        for f in files:
            scale_nsys(f, folder / f.name, 30, period)
        out[name] = folder
    return out


def _replays(path: Path) -> tuple[replay.WhatIf, replay.WhatIf, pl.DataFrame]:
    req = request(path)
    timeline, labelled = req.label(req.runs()[0], None)
    ops = on_clock(with_labels(activities(timeline.kernels, timeline.memops, timeline.ranks), labelled.kernels))
    named = named_stragglers(ops.filter(pl.col("kind") == "comm"))[0].select("run_id", "step", "rank")
    how = {"waits": timeline.waits, "stragglers": named, "ways": WAYS, "replay_trace": False}
    full = replay.windowed(ops, size=1, min_steps=1, **how)
    part = replay.windowed(ops, size=1, min_steps=1, sample=(100, 20), **how)
    return full, part, labelled.steps


def test_sampled_causes_are_within_their_error_of_the_full_replay(longer: dict[str, Path],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """(Every sample kept, however large: two of the runs have stragglers in most steps, and would be replayed
    whole otherwise: the next test.)"""
    monkeypatch.setattr(sampling, "WORTH", 1.0)
    within, judged = 0, 0
    for name, path in longer.items():
        full, part, lost = _replays(path)
        normal = full.steps.filter(~pl.col("first")).height
        sampled = part.steps.filter(~pl.col("first"))
        assert normal == 149 and sampled.height < normal  # a part replayed ...
        assert round(float(sampled[sampling.WEIGHT].sum())) == normal  # ... standing for every step
        a = ranking(full.steps).select("cause", "rank", "cost_ns", "error_ns")
        b = ranking(part.steps).select("cause", "rank", "cost_ns", "error_ns")
        assert a["error_ns"].is_null().all()  # every step replayed: no sampling error
        both = a.join(b, on=["cause", "rank"], how="full", suffix="_s", nulls_equal=True)
        assert both.height == a.height == b.height, name
        for row in both.iter_rows(named=True):
            off = abs(row["cost_ns"] - row["cost_ns_s"])
            if row["cause"] == "straggler":  # its steps are all replayed: exact
                assert off == 0 and row["error_ns_s"] is None, (name, row)
                continue
            judged += 1
            within += off <= (row["error_ns_s"] or 0) + TOLERANCE_NS
        # the critical path of the cases: the same estimate, against every step's time lost
        crit_full, crit_part = critical_of(full.steps, lost), critical_of(part.steps, lost)
        assert crit_full["lost_ns"].equals(crit_part["lost_ns"]) and crit_part["steps"].to_list() == [normal]
    assert judged >= 8 and within >= 0.8 * judged, (within, judged)


def test_a_sample_is_not_replayed_beside_a_whole_replay(longer: dict[str, Path]) -> None:
    """Two ways of replaying a run at once (``windows.windowed_modes``: `detect`'s and `ranks`') share its windows;
    a sample of a long run's steps is other windows: it is left to a replay of its own, either way round."""
    req = request(longer["llama-4rank-cap2-nsys"])
    timeline, labelled = req.label(req.runs()[0], None)
    ops = on_clock(with_labels(activities(timeline.kernels, timeline.memops, timeline.ranks), labelled.kernels))
    named = named_stragglers(ops.filter(pl.col("kind") == "comm"))[0].select("run_id", "step", "rank")
    whole = {"waits": timeline.waits, "stragglers": named, "ways": WAYS, "replay_trace": True}
    sampled = {**whole, "stragglers": named.head(0), "replay_trace": False, "sample": (100, 20)}
    alone = [replay.windowed(ops, min_steps=5, **way).steps for way in (whole, sampled)]
    assert sampling.WEIGHT in alone[1].columns and alone[1].height < alone[0].height  # a sample
    for mine, other in ((0, 1), (1, 0)):
        first, second = windows.windowed_modes(ops, [(whole, sampled)[mine], (whole, sampled)[other]],
                                               min_steps=5)
        assert second is None and first is not None and first.steps.equals(alone[mine])


def test_a_run_with_stragglers_in_most_steps_is_replayed_whole(longer: dict[str, Path]) -> None:
    """Its stragglers' windows would be most of the sample: a sample in small windows would cost more than the
    whole run's replay in large ones."""
    full, part, _ = _replays(longer["gpt2-straggler-nsys"])
    assert sampling.WEIGHT not in part.steps.columns and part.steps.equals(full.steps)


def test_a_short_run_is_replayed_whole_and_says_no_error() -> None:
    full, part, _ = _replays(RUNS / "gpt2-straggler-nsys")
    assert sampling.WEIGHT not in part.steps.columns and part.steps.equals(full.steps)
    rows = ranking(part.steps)
    assert rows["error_ns"].is_null().all() and "sampling" not in " ".join(sentence(r) for r in rows.to_dicts())


def test_the_sampling_error_is_said_in_the_verdict() -> None:
    row = {"run_id": "r", "cause": "idle", "rank": None, "cost_ns": 2_400_000, "share": 2.8, "steps": [3],
           "step_cost_ns": 2_400_000, "time_ns": None, "error_ns": 31_000, "waited_ns": None, "sections": None}
    assert sentence(row) == "idle costs 2.4 ms/step (2.8 %; ±0.03 ms sampling error)"
    assert sentence({**row, "error_ns": 310_000}).endswith("(2.8 %; ±0.3 ms sampling error)")
