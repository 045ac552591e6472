"""`traceql whatif` on real runs: the replay reproduces every step; without the straggler, the steps it held
take what the run's other steps take (the run itself is the truth); the what-ifs keep their promises."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from tests.analyzers.test_stragglers import BEYOND_DDP, STRAGGLER_RUNS, injected
from tests.paths import DDP_TRACE, H200, INRUN_TRACE, KINETO_TOY, NSYS, RUNS, SINGLE_TRACE, corpus
from traceql.commands.whatif import whatif

SHIPPED = [DDP_TRACE, SINGLE_TRACE, INRUN_TRACE, RUNS / "gpt2-4rank-nsys", RUNS / "gpt2-b16-cap25-nsys",
           RUNS / "gpt2-cap2-inrun-nsys", RUNS / "gpt2-torch", RUNS / "resnet50-inrun-nsys", RUNS / "seqpar-nsys",
           *STRAGGLER_RUNS, *BEYOND_DDP, *(RUNS / f"{m}{v}" for m in ("gpt2-fsdp2", "block-tp")
                                           for v in ("-nsys", "-single-nsys")),
           *(RUNS / f"{m}-nsys" for m in ("gpt2-fsdp2-4rank", "gpt2-4rank-cap2", "llama-4rank-cap25",
                                          "llama-4rank-cap2", "llama-single"))]
SHARED_RUNS = [corpus(p, id=p.name) for p in (
    *(NSYS / f"{m}_{v}.sqlite" for m in ("toy", "gpt2") for v in ("ddp2_cap25", "ddp2_cap2", "single")),
    KINETO_TOY, H200 / "nsys-per-rank")]


def _replay_error(steps: pl.DataFrame) -> float:
    return float(((steps["replayed_ns"] - steps["measured_ns"]).abs() / steps["measured_ns"]).median())


@pytest.mark.parametrize("run", [*SHIPPED, *SHARED_RUNS], ids=lambda p: getattr(p, "name", str(p)))
def test_the_replay_reproduces_every_step_and_the_what_ifs_keep_their_promises(run: Path) -> None:
    result = whatif(run)
    steps = result.steps
    assert steps.height >= 3
    assert _replay_error(steps) <= 0.02
    assert (steps["without_contention_ns"] <= steps["replayed_ns"]).all()
    assert steps.filter(pl.col("cases") == 0)["without_contention_ns"].equals(
        steps.filter(pl.col("cases") == 0)["replayed_ns"])
    assert (steps["without_straggler_ns"] <= steps["replayed_ns"]).all()
    assert steps.filter(pl.col("straggler_rank").is_null())["without_straggler_ns"].equals(
        steps.filter(pl.col("straggler_rank").is_null())["replayed_ns"])
    assert result.graph["forced"] == 0  # no cycle in any graph made from a trace


@pytest.mark.parametrize("run,within,cost", [
    *((r, 0.03, 0.1) for r in STRAGGLER_RUNS), (RUNS / "block-tp-straggler-nsys", 0.03, 0.1),
    # FSDP2's step 4, where the waiting rank's CPU ran slower than usual: 89.1 ms against 88.6 ms (+0.6 %)
    (RUNS / "gpt2-fsdp2-straggler-nsys", 0.03, 0.1)], ids=lambda p: getattr(p, "name", str(p)))
def test_without_the_straggler_its_steps_take_what_the_others_take(run: Path, within: float, cost: float) -> None:
    want, _ = injected(run)
    steps = whatif(run).steps.filter(~pl.col("first"))
    held = steps.filter(pl.col("step").is_in(want["steps"]))
    normal = steps.filter(~pl.col("step").is_in(want["steps"]))["measured_ns"].median()
    assert held["straggler_rank"].to_list() == [want["rank"]] * len(want["steps"])
    for row in held.iter_rows(named=True):
        assert abs(row["without_straggler_ns"] / normal - 1) <= within, row
        # and it cost about the sleep the collection injected
        assert row["replayed_ns"] - row["without_straggler_ns"] == pytest.approx(want["sleep_ms"] * 1e6, rel=cost)


def test_the_verdict_names_what_to_act_on() -> None:
    verdict = whatif(RUNS / "gpt2-4rank-straggler-nsys").runs[0]
    assert verdict.text.startswith("overlap saves ")
    assert "the straggler rank 2 costs " in verdict.text and verdict.text.endswith(" in steps 2, 4")
    assert [s["rank"] for s in verdict.stragglers] == [2] and verdict.stragglers[0]["steps"] == [2, 4]
    single = whatif(SINGLE_TRACE).runs[0]
    assert single.lines == ["no communication to overlap", "no slowdown cases", "one rank: no straggler to judge"]


def test_a_trace_whose_stream_order_is_impossible_is_noted(tmp_path: Path) -> None:
    """One kernel lengthened by a millisecond in a copy of a real export, so that it overlaps the next one on its
    stream: the replay still runs, and the what-if says the trace is broken instead of trusting it."""
    import shutil
    import sqlite3

    run = shutil.copytree(RUNS / "block-tp-nsys", tmp_path / "block-tp-nsys")
    assert whatif(run).graph["disordered"] == 0 and not any("broken" in n for n in whatif(run).notes)
    export = run / "traces" / "block-tp-nsys_rank0.sqlite"
    with sqlite3.connect(export) as db:
        (stream, start), = db.execute("SELECT streamId, start FROM CUPTI_ACTIVITY_KIND_KERNEL "
                                      "ORDER BY start LIMIT 1 OFFSET 200").fetchall()
        db.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET \"end\" = \"end\" + 1000000 WHERE streamId = ? AND start = ?",
                   (stream, start))
    result = whatif(run)
    assert result.graph["disordered"] >= 1
    assert any("stream runs in order, so the trace is broken or was edited" in n for n in result.notes)
