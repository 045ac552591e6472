"""`traceql whatif` on real runs: the replay reproduces every step; without the straggler, the steps it held
take what the run's other steps take (the run itself is the truth); the what-ifs keep their promises."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from tests.analyzers.test_stragglers import BEYOND_DDP, STRAGGLER_RUNS, injected
from tests.paths import DDP_TRACE, H200, INRUN_TRACE, KINETO_TOY, NSYS, ROOT, RUNS, SHARED, SINGLE_TRACE, corpus
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
    # the causes' what-ifs take a cause's time out: never a longer step
    assert (steps["without_communication_ns"] <= steps["replayed_ns"]).all()
    assert (steps["without_idle_ns"] <= steps["replayed_ns"]).all()
    # and the whatif page's table of the replays says what this one is made of
    key = run.relative_to(SHARED if run.is_relative_to(SHARED) else ROOT / "datasets").as_posix()
    g = result.graph
    assert _documented()[key.removesuffix(".sqlite")] == (
        f"{g['activities']:,}", f"{g['recorded']:,} / {g['inferred']:,}", f"{g['unexplained']:,}")


def _documented() -> dict[str, tuple[str, str, str]]:
    """The whatif page's table: per run, its GPU activities, waits recorded / inferred, and those that began
    later than anything explains."""
    out = {}
    for line in (ROOT / "docs" / "commands" / "whatif.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| `") and len(cells) == 8:
            out[cells[0].split("`")[1]] = (cells[3], cells[6], cells[7])
    return out


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
    # the causes first, largest first: the straggler, priced over the normal steps and in the steps it held
    assert verdict.lines[0].startswith("the straggler rank 2 costs ") and " in steps 2, 4" in verdict.lines[0]
    costs = [c["cost_ns"] for c in verdict.causes]
    assert costs == sorted(costs, reverse=True) and verdict.causes[0]["rank"] == 2
    assert {c["cause"] for c in verdict.causes} == {"straggler", "contention", "exposed communication", "idle"}
    held = verdict.stragglers[0]
    assert verdict.causes[0]["cost_ns"] == pytest.approx(held["cost_ns"] * 2 / verdict.steps, abs=1e5)
    assert any(line.startswith("overlap saves ") for line in verdict.lines)
    assert [s["rank"] for s in verdict.stragglers] == [2] and verdict.stragglers[0]["steps"] == [2, 4]
    single = whatif(SINGLE_TRACE).runs[0]
    assert single.lines[1:] == ["no communication to overlap", "no slowdown cases", "one rank: no straggler to judge"]
    assert [c["cause"] for c in single.causes] == ["idle"] and single.lines[0].startswith("idle costs ")


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


def test_without_idle_each_step_begins_when_it_began() -> None:
    """The idle what-if on the embedded single-GPU run (real launches, one rank): the CPU time before each
    launch call goes, but the call that opens a step keeps the time its CPU took to reach it (the step begins
    when it began: that time is before the step, not idle in it), and each step saves at most its measured idle
    (the GPU's time within the step with no activity, `ranks`). Taking the opening call's time out too doubled
    step 2's saving (0.43 -> 0.71 ms)."""
    import numpy as np

    from tests.paths import SINGLE_TRACE
    from traceql.analyzers.replay.activities import activities, on_clock
    from traceql.analyzers.replay.engine import replay
    from traceql.analyzers.replay.graph import BLOCKED, CHAIN, build
    from traceql.analyzers.replay.removed import without_idle
    from traceql.commands.ranks import ranks
    from traceql.labelling.inputs import read_timeline

    timeline = read_timeline(SINGLE_TRACE)
    rg = build(on_clock(activities(timeline.kernels, timeline.memops, timeline.ranks)), timeline.waits)
    free = without_idle(rg, pl.DataFrame(schema={"run_id": pl.String, "step": pl.Int32, "rank": pl.Int32}))
    g, n = rg.graph, rg.n_ops
    node = np.repeat(np.arange(g.n), np.diff(g.pred_ptr))  # each edge's node (the call it leads to)
    cpu = np.isin(rg.edge_kind, (CHAIN, BLOCKED)) & (node >= n)
    calls = rg.ops.select("step")[rg.launch_op]
    opening = calls.select(pl.col("step").is_not_null() & (pl.int_range(pl.len()).over("step") == 0)).to_series()
    opens = opening.to_numpy()[node[cpu] - n]
    assert opens.sum() >= 5 and (g.pred_lag[cpu][opens] > 0).all()
    assert (free.pred_lag[cpu][opens] == g.pred_lag[cpu][opens]).all()  # the opening call keeps its time
    stepped = calls["step"].is_not_null().to_numpy()[node[cpu] - n]
    assert (free.pred_lag[cpu][stepped & ~opens] == 0).all()  # every other call of a step: none
    whole, freed = replay(g), replay(free)
    spans = rg.ops.select("step").with_columns(
        pl.Series("s", whole.start[:n]), pl.Series("e", whole.end[:n]), pl.Series("fs", freed.start[:n]),
        pl.Series("fe", freed.end[:n])).filter(pl.col("step").is_not_null()).group_by("step").agg(
        (pl.col("e").max() - pl.col("s").min() - pl.col("fe").max() + pl.col("fs").min()).alias("saved"))
    saved = spans.join(pl.DataFrame(ranks(SINGLE_TRACE).steps).select("step", "idle_ns"), on="step")
    assert saved.height >= 5 and ((saved["saved"] >= 0) & (saved["saved"] <= saved["idle_ns"])).all(), saved
