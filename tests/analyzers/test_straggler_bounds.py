"""The straggler what-if takes time out, never puts it in: replayed without the stragglers, every activity that
is no collective's member lasts at most what it lasted in the trace (a collective's members end together, so
theirs is a wait, not a duration). On the shipped runs with an injected straggler."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tests.paths import RUNS
from traceql.analyzers.replay.activities import activities, on_clock
from traceql.analyzers.replay.engine import replay
from traceql.analyzers.replay.graph import build
from traceql.analyzers.replay.without_straggler import without_stragglers
from traceql.labelling.request import request
from traceql.verdicts.pricing import named_stragglers


@pytest.mark.parametrize("run", [RUNS / "gpt2-straggler-nsys", RUNS / "llama-4rank-straggler-nsys",
                                 RUNS / "block-tp-straggler-nsys"], ids=lambda p: p.name)
def test_no_activity_lasts_longer_without_the_straggler(run: Path) -> None:
    req = request(run)
    timeline, _ = req.label(req.runs()[0], None)
    ops = on_clock(activities(timeline.kernels, timeline.memops, timeline.ranks))
    named = named_stragglers(ops.filter(pl.col("kind") == "comm"))[0].select("run_id", "step", "rank")
    injected = json.loads((run / "manifest.json").read_text())["input"]["local_config"]["straggler"]
    assert sorted(named["step"].to_list()) == sorted(injected["steps"])  # the what-if has stragglers to remove
    rg = build(ops, timeline.waits)
    measured = (rg.ops["end_ns"] - rg.ops["start_ns"]).to_numpy()  # each activity as the trace has it
    graph = without_stragglers(rg, named)
    done = replay(graph)
    n = rg.n_ops
    alone = graph.group[:n] < 0  # no collective's member
    took = (done.end - done.start)[:n]
    assert alone.sum() > 1000
    longer = np.flatnonzero(alone & (took > measured))
    assert longer.size == 0, f"{longer.size} activities longer than measured, by up to " \
        f"{int((took - measured)[longer].max())} ns"
    assert (took[alone] < measured[alone]).sum() > 100  # and the straggler steps' activities did get shorter
