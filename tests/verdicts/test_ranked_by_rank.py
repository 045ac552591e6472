"""`ranks` and `whatif` of a large run of rank files label and replay it a rank at a time, from its activities
stored as `detect`'s passes store them (``verdicts.ranks.ranked_run``): the figures are those of the run read
whole, on the shipped runs of each reader and the public traces; which way a run goes is by its size."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.paths import DDP_TRACE, PUBLIC, RUNS, corpus
from traceql.commands.ranks import ranks
from traceql.commands.whatif import whatif
from traceql.labelling.request import request
from traceql.sources import shards
from traceql.verdicts import ranks as ranked

RUNS_OF_RANKS = [
    pytest.param(DDP_TRACE, id="embedded"),
    pytest.param(RUNS / "gpt2-4rank-straggler-nsys", id="4-ranks-straggler"),
    pytest.param(RUNS / "llama-4rank-cap2-nsys", id="llama-4-ranks"),
    pytest.param(RUNS / "seqpar-nsys", id="sequence-parallel"),
    pytest.param(RUNS / "gpt2-torch", id="kineto"),
    corpus(PUBLIC / "hta-kineto" / "trace_filter", id="public-hta"),
]


def _both(run: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    return whatif(run).to_dict(), ranks(run).to_dict()


@pytest.mark.parametrize("run", RUNS_OF_RANKS)
def test_a_run_ranked_a_rank_at_a_time_has_the_figures_of_the_run_read_whole(run: Path, monkeypatch) -> None:
    monkeypatch.setattr(shards, "LARGE_BYTES", 1 << 62)
    whole = _both(run)
    monkeypatch.setattr(shards, "LARGE_BYTES", -1)
    split = _both(run)
    assert split == whole
    assert whole[1]["steps"] and whole[0]["runs"][0]["verdict"]


def test_a_run_is_ranked_a_rank_at_a_time_above_the_size(monkeypatch) -> None:
    run = RUNS / "gpt2-4rank-straggler-nsys"
    req = request(run)
    size = sum(p.stat().st_size for p in (run / "traces").iterdir())
    monkeypatch.setattr(shards, "LARGE_BYTES", size - 1)
    above = ranked.ranked_run(req, req.runs()[0], None)
    assert above.timeline is None and above.labelled is None  # its timeline never read whole
    assert above.facts.ranks.height == 4 and above.facts.collectives == {"AllReduce"}
    monkeypatch.setattr(shards, "LARGE_BYTES", size)
    at = ranked.ranked_run(req, req.runs()[0], None)
    assert at.timeline is not None and at.labelled is not None
    assert above.result.stragglers.equals(at.result.stragglers) and at.result.stragglers.height >= 1
    assert (above.facts.collectives, sorted(above.facts.paths), above.facts.talking, above.facts.active) == (
        at.facts.collectives, sorted(at.facts.paths), at.facts.talking, at.facts.active)
    forced = ranked.ranked_run(req, req.runs()[0], None, by_rank=True)
    assert forced.timeline is None
