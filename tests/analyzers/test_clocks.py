"""Every command says the same of a run whose ranks' clocks disagree (HTA's public ``trace_filter``: its
collectives end 21.3 ms apart on the ranks): `ranks` and `whatif` measure no straggler, and the report draws
each rank from its own start; a run on one clock (the embedded example) is judged and drawn on it. The public
trace skips when ../shared is absent."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import traceql
from tests.paths import DDP_TRACE, SHARED
from traceql.analyzers.reports import step_timeline
from traceql.commands.report import report
from traceql.labelling.inputs import read_timeline
from traceql.verdicts.ranks import clocks_disagree

FILTER = SHARED / "public/hta-kineto/trace_filter"
needs_public = pytest.mark.skipif(not FILTER.exists(), reason="../shared/datasets/public is absent")


@needs_public
def test_clocks_that_disagree_are_said_alike_everywhere(tmp_path: Path) -> None:
    assert clocks_disagree(read_timeline(FILTER)) == ["sampled"]
    ranked = traceql.ranks(FILTER)
    assert ranked.unaligned == ["sampled"] and ranked.causes.is_empty()
    said = [n for n in ranked.notes if "their clocks disagree" in n]
    assert len(said) == 1 and said[0].endswith("no straggler, replay or cause is measured")
    what = traceql.whatif(FILTER)
    (run,) = what.runs
    assert not run.clocks_agree and run.causes == [] and what.steps.is_empty()  # nothing replayed, nothing drawn
    assert run.lines == ["not replayed: its ranks' clocks disagree (a replay joins the ranks at their collectives): "
                         "no cause is priced"]
    found = traceql.detect(FILTER)
    assert found.causes.is_empty() and found.critical.is_empty()  # no critical path on an axis it cannot trust
    assert said[0] in what.notes and said[0] in found.notes  # the same words from every command
    report(FILTER, output=tmp_path / "r.html")
    html = (tmp_path / "r.html").read_text()
    assert said[0] in html and "no cause is priced" in html
    assert "each rank is drawn from its own first start" in html and "share one time axis" not in html
    assert "ms from the rank's own first GPU work of the step" in html  # the axis says so too


def test_one_clock_is_judged_and_drawn_on_it(tmp_path: Path) -> None:
    assert clocks_disagree(read_timeline(DDP_TRACE)) == []
    (run,) = traceql.whatif(DDP_TRACE).runs
    assert run.clocks_agree and "not replayed" not in run.text and run.causes
    report(DDP_TRACE, output=tmp_path / "r.html")
    assert "The ranks share one time axis" in (tmp_path / "r.html").read_text()


def test_a_rank_on_its_own_clock_starts_at_zero() -> None:
    timeline = read_timeline(DDP_TRACE)
    labelled = traceql.detect(DDP_TRACE).kernels
    shared = step_timeline(labelled, timeline.kernels, timeline.memops, 2, timeline.ranks)
    own = step_timeline(labelled, timeline.kernels, timeline.memops, 2, timeline.ranks, own_clocks=True)
    firsts = own.group_by("rank").agg(pl.col("start_ms").min())["start_ms"]
    assert (firsts == 0).all() and shared["start_ms"].min() == 0
    assert shared.group_by("rank").agg(pl.col("start_ms").min())["start_ms"].max() > 0  # one rank began later
