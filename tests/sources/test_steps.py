"""Step attribution: every kernel belongs to the step whose CPU range holds its launching API call, checked
against an independent computation (sqlite3 / the JSON, through correlation ids) on real traces."""

from __future__ import annotations

import gzip
import json
import re
import shutil
import sqlite3
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest

import traceql
from tests.oracle import nsys_steps
from tests.paths import DDP_TRACE, H200, INRUN_TRACE, KINETO_TOY, NSYS, PUBLIC, SINGLE_FILE, SINGLE_TRACE, corpus

NSYS_WITH_STEPS = [DDP_TRACE, SINGLE_TRACE, INRUN_TRACE] + [
    corpus(p, id=p.name) for p in [*(NSYS / f"{m}_{v}.sqlite" for m in ("toy", "gpt2")
                                     for v in ("ddp2_cap25", "ddp2_cap2", "single")),
                                   H200 / "nsys-per-rank"]]


def ours(path: Path) -> dict[tuple[int, int], tuple[int, str] | None]:
    """(process id, correlation id) → (step, kind) as traceql attributes them."""
    with traceql.read_trace(path) as t:
        k = t.sql("""SELECT r.pid, k.correlation_id, k.step, k.step_kind FROM kernels k
                     JOIN ranks r USING (run_id, rank)""")
    return {(pid, corr): None if step is None else (step, kind) for pid, corr, step, kind in k.iter_rows()}


@pytest.mark.parametrize("path", NSYS_WITH_STEPS, ids=lambda p: getattr(p, "name", p))
def test_nsys_steps_follow_the_launching_call(path: Path) -> None:
    want = nsys_steps(path)
    got = ours(path)
    assert got == want
    assert sum(v is not None for v in want.values()) > 0.9 * len(want)  # nearly all kernels are in a step


def test_isolated_steps_are_their_own_kind() -> None:
    with traceql.read_trace(INRUN_TRACE) as t:
        steps = t.relation("steps")
        kernels = t.kernels
    per_rank = steps.group_by("rank", "step_kind").len().sort("rank", "step_kind")
    assert per_rank.rows() == [(0, "isolated", 3), (0, "sync", 5), (1, "isolated", 3), (1, "sync", 5)]
    # each step's GPU extent is that of its kernels and memory operations (here: its kernels bound it)
    span = kernels.filter(pl.col("step").is_not_null()).group_by("rank", "step", "step_kind").agg(
        pl.col("start_ns").min().alias("first"), pl.col("end_ns").max().alias("last"))
    joined = steps.join(span, on=["rank", "step", "step_kind"])
    assert joined.height == steps.height
    assert (joined["gpu_start_ns"] <= joined["first"]).all() and (joined["gpu_end_ns"] >= joined["last"]).all()
    assert (joined["cpu_start_ns"] < joined["gpu_start_ns"]).all()  # a step launches before its GPU work runs


def kineto_steps(path: Path) -> dict[tuple[int, int], int | None]:
    """(rank file index, correlation id) → ProfilerStep number, from the raw JSON."""
    out = {}
    for index, f in enumerate(sorted(path.glob("*.json.gz"))):
        events = json.loads(gzip.decompress(f.read_bytes()), parse_float=Decimal)["traceEvents"]
        ns = lambda v: int(Decimal(v) * 1000)  # noqa: E731
        launch: dict[int, int] = {}
        for e in events:
            if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {}):
                c = e["args"]["correlation"]
                launch[c] = min(launch.get(c, ns(e["ts"])), ns(e["ts"]))
        steps = [(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), int(m.group(1))) for e in events
                 if e.get("cat") == "user_annotation" and (m := re.match(r"ProfilerStep#(\d+)$", e.get("name", "")))]
        for e in events:
            if e.get("cat") == "kernel":
                t = launch.get(e["args"]["correlation"])
                hit = [s for a, b, s in steps if t is not None and a <= t <= b]
                out[(index, e["args"]["correlation"])] = hit[0] if hit else None
    return out


@pytest.mark.corpus
def test_kineto_steps_are_profiler_steps() -> None:
    path = KINETO_TOY
    want = kineto_steps(path)
    with traceql.read_trace(path) as t:
        k = t.sql("SELECT rank, correlation_id, step, step_kind FROM kernels WHERE kind <> 'sync'")
    got = {(rank, corr): step for rank, corr, step, _ in k.iter_rows()}
    assert got == want
    assert set(k["step_kind"].drop_nulls()) == {"sync"} and k["step"].drop_nulls().n_unique() == 5


@pytest.mark.corpus
def test_a_trace_without_step_ranges_has_no_steps() -> None:
    """A real export with 16,782 NVTX ranges, none of them a step: no kernel gets a step, no step exists."""
    with traceql.read_trace(PUBLIC / "nsysai-h100" / "h100_2gpu_1s.sqlite") as t:
        assert t.sql("SELECT count(*) FROM nvtx").item() > 10_000
        assert t.sql("SELECT count(step) FROM kernels").item() == 0 and t.relation("steps").is_empty()


def test_a_run_without_steps_beside_one_with_them(tmp_path: Path) -> None:
    """Read together, the run whose annotations were removed gets no steps, and the other run's kernels keep
    exactly the steps they have when read alone."""
    bare = tmp_path / "a_no_steps.sqlite"  # its run sorts first: the other run's rows come after it
    shutil.copyfile(SINGLE_FILE, bare)
    with sqlite3.connect(bare) as db:
        db.execute("DELETE FROM NVTX_EVENTS")
    with traceql.read_trace(SINGLE_FILE) as t:
        alone = t.kernels.select("correlation_id", "step", "step_kind")
    with traceql.read_trace([bare, SINGLE_FILE]) as t:
        both = t.kernels
        runs = both["run_id"].unique().sort().to_list()
    assert len(runs) == 2 and alone["step"].is_not_null().sum() > 1000
    theirs = both.filter(pl.col("run_id") == SINGLE_FILE.stem).select(alone.columns)
    assert theirs.equals(alone)
    assert both.filter(pl.col("run_id") == "a_no_steps").select(pl.col("step", "step_kind").null_count()).row(0) \
        == (alone.height, alone.height)


def test_text_with_a_backslash_x_is_utf8(tmp_path) -> None:
    """Names holding a literal ``\\x`` (an environment string, a path on Windows) are UTF-8: no warning, no
    temporary copy, the text as written (pipit's saxpy export said "0 text values ... not UTF-8": a cast to
    BLOB read the backslash as an escape and failed)."""
    import shutil
    import sqlite3

    from tests.paths import SINGLE_FILE
    from traceql.commands.query import run_query

    odd = "C:\\xtools\\HDF5=\\xZZ"
    copy = tmp_path / "odd.sqlite"
    shutil.copyfile(SINGLE_FILE, copy)
    with sqlite3.connect(copy) as db:
        db.execute("UPDATE NVTX_EVENTS SET text = ? WHERE text IS NOT NULL", (odd,))
    notes: list[str] = []
    got = run_query([copy], "SELECT DISTINCT text FROM nvtx WHERE text IS NOT NULL", notes=notes)
    assert odd in got["text"].to_list() and not [n for n in notes if "UTF-8" in n], notes
