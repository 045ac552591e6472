"""A run that is one part of a larger job (one rank's file of a DDP run) says so in every verdict; a whole run
does not. HTA's public single-rank traces (their ``distributedInfo`` names a world of 2 and 16) skip when
../shared is absent."""

from __future__ import annotations

import pytest

import traceql
from tests.paths import DDP_FILE, DDP_TRACE, RUNS, SHARED

PUBLIC = SHARED / "public/hta-kineto"
needs_public = pytest.mark.skipif(not PUBLIC.exists(), reason="../shared/datasets/public is absent")


def _partial(notes: list[str]) -> list[str]:
    return [n for n in notes if "part of a larger job" in n]


def test_one_rank_of_a_two_rank_run_is_part_of_a_larger_job() -> None:
    for result in (traceql.detect(DDP_FILE), traceql.whatif(DDP_FILE), traceql.ranks(DDP_FILE)):
        said = _partial(result.notes)
        assert len(said) == 1 and "(rank 0 alone; its collectives' peers are absent)" in said[0]
    for result in (traceql.detect(DDP_TRACE), traceql.whatif(DDP_TRACE), traceql.ranks(DDP_TRACE)):
        assert _partial(result.notes) == []


def test_a_rank_labelled_on_its_own_is_judged_over_the_whole_run() -> None:
    """Rank by rank (``--workers``), each shard holds one rank: the run is judged over all of them."""
    run = RUNS / "gpt2-4rank-nsys"
    assert _partial(traceql.detect(run, workers=2).notes) == []
    one = next((run / "traces").glob("*_rank2.sqlite"))
    said = _partial(traceql.detect(one, workers=2).notes)
    assert len(said) == 1 and "(rank 2 alone;" in said[0]


@needs_public
@pytest.mark.parametrize("name,partial", [("nccl_parser_config", True), ("trace_diff/test", True),
                                          ("negative_queue_length_values_check", True), ("trace_filter", False)])
def test_public_kineto_traces(name: str, partial: bool) -> None:
    assert bool(_partial(traceql.detect(PUBLIC / name).notes)) is partial
