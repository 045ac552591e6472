"""What a verdict may say, held on every trace we have: the shipped runs, the embedded example, every public
trace of ../shared and the ground-truth matrix's traced runs. The bounds are read from `ranks`' own step
table (an independent read of the same trace, by another command), per normal step the largest over its
ranks, the run's first captured step left out:

- overlapping saves at most the communication that ran beside computation, and costs at most that and the
  contention; a step whose communication never ran beside computation is serialized already (its serialized
  what-if is its replay) and the verdict says overlap saves nothing;
- exposed communication costs at most its time; idle at most its time and the exposed communication that
  sooner launches would hide, and the line says so where it is more than the idle time;
- an interval (±) only on a run like the validated ones: nsys exports, 2 or 4 ranks, H100 or H200 GPUs, DDP's
  collectives;
- a run without steps says so, and nothing else.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import polars as pl
import pytest

from tests.paths import DDP_TRACE, PUBLIC, RUNS, corpus
from traceql.commands.ranks import ranks
from traceql.commands.whatif import whatif

SLACK_NS = 50_000  # figures are shown to 0.1 ms; the bounds hold within half of that
NONE_NS = 1_000
VALIDATED_WORLDS = {2, 4}
VALIDATED_COLLECTIVES = {"AllReduce", "Broadcast"}


def _shipped() -> list[object]:
    runs = [p for p in sorted(RUNS.iterdir()) if any((p / "traces").glob("*.sqlite")) or any(
        (p / "traces").glob("*.json*"))]
    return [pytest.param(DDP_TRACE, id="embedded"), *(pytest.param(p, id=p.name) for p in runs)]


def _public() -> list[object]:
    if not PUBLIC.is_dir():
        return [corpus(PUBLIC, id="public-absent")]
    found = []
    for path in sorted(PUBLIC.rglob("*")):
        if path.is_file() and path.name.endswith((".sqlite", ".json.gz")):
            folder = path.parent
            found.append(folder if "hta-kineto" in folder.parts else path)
    return [corpus(p, id=str(p.relative_to(PUBLIC))) for p in dict.fromkeys(found)]


def _matrix() -> list[object]:
    from traceql.validation import load_matrix

    return [pytest.param(r, id=f"{r.folder.parent.name}/{r.name}")
            for r in load_matrix().runs if not r.light]


def _check(path: Path) -> None:
    result = whatif(path)
    steps = ranks(path).steps
    for v in result.runs:
        mine = result.steps.filter(pl.col("run_id") == v.run_id)
        if mine.is_empty():
            if v.clocks_agree and v.lines != ["no GPU activity to replay (a run on CPU?)"]:
                assert v.lines == ["no steps to replay (no NVTX step_<i> or ProfilerStep#<i> ranges)"]
            continue
        judged = mine.filter(~pl.col("first")) if mine.filter(~pl.col("first")).height else mine
        per_step = (steps.filter(pl.col("run_id") == v.run_id)
                    .group_by("step").agg(pl.col("idle_ns").max(), pl.col("exposed_comm_ns").max(),
                                          (pl.col("comm_ns") - pl.col("exposed_comm_ns")).max().alias("beside"))
                    .join(judged.select("step"), on="step"))
        assert per_step.height == judged.height, "ranks and whatif judge the same steps"
        idle, exposed = per_step["idle_ns"].mean(), per_step["exposed_comm_ns"].mean()
        beside = statistics.median(per_step["beside"].to_list())
        cause = {c["cause"]: c for c in v.causes if c["rank"] is None}
        if "exposed communication" in cause:
            assert cause["exposed communication"]["cost_ns"] <= exposed + SLACK_NS
        if "idle" in cause:
            cost = cause["idle"]["cost_ns"]
            assert cost <= idle + exposed + SLACK_NS
            said = next(line for line in v.lines if line.startswith("idle costs"))
            assert (cost > idle + SLACK_NS) == ("also hide communication" in said), said
        # a step with no communication beside computation is serialized already
        none = per_step.filter(pl.col("beside") <= NONE_NS)["step"]
        alike = mine.filter(pl.col("step").is_in(none.implode()))
        assert (alike["serialized_ns"] == alike["replayed_ns"]).all()
        if v.overlap_saves_ns is not None:
            contention = max(v.contention_ns or 0, 0)
            assert -(beside + contention) - SLACK_NS <= v.overlap_saves_ns <= beside + SLACK_NS
            never = bool((per_step["beside"] <= NONE_NS).all())
            assert never == any("never ran beside computation" in line for line in v.lines), v.lines
            if never:  # nothing, by construction: no interval either
                assert v.overlap_saves_ns == 0 and v.intervals.get("overlap_saves_ns") is None
        if any(b is not None for b in v.intervals.values()):
            _like_the_validated(path, v.run_class or "", steps.filter(pl.col("run_id") == v.run_id))


def _like_the_validated(path: Path, run_class: str, steps: pl.DataFrame) -> None:
    files = sorted((path / "traces").glob("*")) if (path / "traces").is_dir() else [path]
    assert all(f.name.endswith(".sqlite") for f in files), files
    assert steps["rank"].n_unique() in VALIDATED_WORLDS
    assert run_class.startswith(("H100", "H200")), run_class


@pytest.mark.parametrize("path", _shipped())
def test_shipped_runs(path: Path) -> None:
    _check(path)


@pytest.mark.parametrize("path", _public())
def test_public_traces(path: Path) -> None:
    _check(path)


@pytest.mark.parametrize("run", _matrix())
def test_matrix_runs(run: object) -> None:
    _check(run.path())  # type: ignore[attr-defined]
