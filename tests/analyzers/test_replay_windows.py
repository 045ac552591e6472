"""A run replayed a window of steps at a time gives what its whole replay gives: every what-if the same to the
nanosecond, but the straggler's, whose statistics come from the window's steps (within a few per cent of its
cost), on real runs cut into windows of two and three steps."""

from __future__ import annotations

import threading

import polars as pl
import pytest

from tests.paths import H200, RUNS
from traceql.analyzers import replay
from traceql.analyzers.replay import stored as stored_module
from traceql.analyzers.replay import windows
from traceql.analyzers.replay.activities import activities, on_clock, with_labels
from traceql.labelling.request import request
from traceql.verdicts.pricing import WAYS, named_stragglers

EXACT = [k for k in replay.WAYS if k != "without_straggler_ns"]
REPLAY_ONE = windows.window_steps


def _both(path, min_steps: int) -> tuple[replay.WhatIf, replay.WhatIf, int]:
    req = request(path)
    timeline, labelled = req.label(req.runs()[0], None)
    ops = on_clock(with_labels(activities(timeline.kernels, timeline.memops, timeline.ranks), labelled.kernels))
    named = named_stragglers(ops.filter(pl.col("kind") == "comm"))[0].select("run_id", "step", "rank")
    how = {"waits": timeline.waits, "stragglers": named, "ways": (*WAYS, "serialized_ns")}
    whole = replay.steps(ops, cases=ops["_case"], baseline=ops["_base"], **how)
    plan = windows.plan(ops.lazy(), 1, min_steps)
    return whole, replay.windowed(ops, size=1, min_steps=min_steps, **how), len(plan)


def _compared(whole: replay.WhatIf, windowed: replay.WhatIf) -> pl.DataFrame:
    assert windowed.steps.select("run_id", "step", "first").equals(whole.steps.select("run_id", "step", "first"))
    assert windowed.activities == whole.activities  # each activity counted by one window
    return whole.steps.join(windowed.steps, on=["run_id", "step"], suffix="_w")


def test_a_straggler_run_in_windows_of_two_steps_replays_as_whole() -> None:
    whole, windowed, n = _both(RUNS / "gpt2-late-nsys", 2)
    assert n == 2
    both = _compared(whole, windowed)
    for k in EXACT:
        assert both[k].equals(both[f"{k}_w"], null_equal=True), k
    held = both.filter(pl.col("straggler_rank").is_not_null())
    assert held.height >= 2
    cost = held["replayed_ns"] - held["without_straggler_ns"]
    off = (held["without_straggler_ns"] - held["without_straggler_ns_w"]).abs()
    assert (cost > 1_000_000).all() and (off <= 0.05 * cost).all()


def test_a_run_in_windows_of_three_steps_replays_as_whole_to_the_nanosecond() -> None:
    path = H200 / "nsys" / "gpt2_ddp2_cap2.sqlite"
    if not path.exists():
        pytest.skip("the shared corpus is absent")
    whole, windowed, n = _both(path, 3)
    assert n == 3
    both = _compared(whole, windowed)
    for k in replay.WAYS:
        assert both[k].equals(both[f"{k}_w"], null_equal=True), k


def test_windows_hold_every_step_once_with_the_step_before() -> None:
    req = request(RUNS / "gpt2-4rank-straggler-nsys")
    timeline, _ = req.label(req.runs()[0], None)
    ops = windows.with_buckets(activities(timeline.kernels, timeline.memops, timeline.ranks)).lazy()
    plan = windows.plan(ops, 1, 2)
    steps = sorted(timeline.kernels.filter(pl.col("step_kind") == "sync")["step"].unique().to_list())
    assert [s for w in plan for s in range(w.first, w.last + 1)] == steps
    assert [w.since for w in plan] == [steps[0], *(w.first - 1 for w in plan[1:])]
    held = [ops.filter(w.holds()).collect() for w in plan]
    own = [h.height - h.select(w.before().sum()).item() for h, w in zip(held, plan, strict=True)]
    assert sum(own) == ops.collect().height  # every activity reported by one window


@pytest.mark.parametrize("written, read", [(None, None), (97, 97), (1000, 97)],
                         ids=["batches as stored", "small batches, slices across them", "other batches than read"])
def test_activities_stored_a_file_a_rank_are_read_a_slice_a_window(tmp_path, monkeypatch: pytest.MonkeyPatch,
                                                                   written: int | None, read: int | None) -> None:
    """Each rank's activities in a file of their own, sorted by bucket: a window reads the rows the whole
    frame's filter gives, and the run replays the same from the files as from the frame; so too where a window's
    slice spans many record batches, and from files whose batches are not the size a window expects (written
    otherwise: read through polars)."""
    req = request(RUNS / "gpt2-late-nsys")
    timeline, labelled = req.label(req.runs()[0], None)
    ops = on_clock(with_labels(activities(timeline.kernels, timeline.memops, timeline.ranks), labelled.kernels))
    files, index = [], []
    if written is not None:
        monkeypatch.setattr(stored_module, "BATCH_ROWS", written)
    for (rank,), part in ops.partition_by("rank", as_dict=True, maintain_order=True).items():
        files.append(tmp_path / f"rank{rank}.arrow")
        index.append(windows.Stored.write(part, files[-1]))
    if read is not None:
        monkeypatch.setattr(stored_module, "BATCH_ROWS", read)
    slices = [stored_module._batches(f, 5, 300, n) for f, (_, _, n) in zip(files, index, strict=True)]
    assert all((s is None) == (written != read) for s in slices)  # other batches: read through polars
    stored = windows.Stored(tuple(files), tuple(index))
    frame = windows.with_buckets(ops)
    plan = windows.plan(stored.scan(), 1, 2)
    assert len(plan) == 2
    order = ["rank", "start_ns", "end_ns", "stream", "device"]
    for w in plan:
        assert stored.window(w).sort(order).equals(frame.filter(w.holds()).sort(order))
    # the collectives stored dictionary-encoded (a scan of every file for the communication reads no text of the
    # compute kernels' names), read back as the text they were
    assert all(pl.read_ipc_schema(f)["collective"] == pl.Categorical for f in files)
    comm = stored.scan().filter(pl.col("kind") == "comm").collect()
    assert comm.schema == frame.schema
    assert comm.sort(order).equals(frame.filter(pl.col("kind") == "comm").sort(order))
    how = {"waits": timeline.waits, "ways": (*WAYS, "serialized_ns"), "size": 1, "min_steps": 2}
    assert replay.windowed(stored, **how).steps.equals(replay.windowed(ops, **how).steps)


def _windows_of(path, monkeypatch: pytest.MonkeyPatch, threads: str) -> tuple[replay.WhatIf, list[str]]:
    """``path``'s run replayed in windows of one step (``windows`` default mapper), with ``threads`` cores said
    to be free (``OMP_NUM_THREADS``); the names of the threads each window was replayed on."""
    monkeypatch.setenv("OMP_NUM_THREADS", threads)
    req = request(path)
    timeline, labelled = req.label(req.runs()[0], None)
    ops = on_clock(with_labels(activities(timeline.kernels, timeline.memops, timeline.ranks), labelled.kernels))
    seen: list[str] = []

    def noted(window: windows.Window, job: windows.Windowed) -> object:
        seen.append(threading.current_thread().name)
        return REPLAY_ONE(window, job)

    monkeypatch.setattr(windows, "window_steps", noted)
    got = replay.windowed(ops, size=1, min_steps=1, waits=timeline.waits, ways=WAYS)
    return got, seen


def test_windows_replayed_two_at_a_time_give_what_one_after_another_gives(monkeypatch: pytest.MonkeyPatch) -> None:
    apart, one_by_one = _windows_of(RUNS / "gpt2-late-nsys", monkeypatch, "1")
    paired, on_threads = _windows_of(RUNS / "gpt2-late-nsys", monkeypatch, "2")
    assert len(one_by_one) == len(on_threads) >= 4
    assert set(one_by_one) == {threading.main_thread().name}
    assert all(name.startswith("traceql-window") for name in on_threads)
    assert paired.steps.equals(apart.steps) and paired.activities == apart.activities


def test_a_window_that_fails_on_a_thread_fails_the_replay(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    done: list[int] = []

    def replay_one(window: windows.Window, _job: object) -> int:
        if window.first == 3:
            raise ValueError("window 3")
        done.append(window.first)
        return window.first

    cut = [windows.Window("r", i - 1, i, i, i == 1, i == 9, 10) for i in range(1, 10)]
    got = windows._threaded(replay_one, cut, None)  # type: ignore[arg-type]
    assert [next(got), next(got)] == [1, 2]
    with pytest.raises(ValueError, match="window 3"):
        next(got)
    assert max(done) <= 5  # the windows after it were never begun, but the one or two already running


@pytest.mark.parametrize(("over", "paired"), [(0, True), (1, False)], ids=["a step over WINDOW", "far over"])
def test_windows_cut_by_their_steps_are_paired_while_a_step_over_the_size(monkeypatch: pytest.MonkeyPatch,
                                                                          over: int, paired: bool) -> None:
    """Windows cut by their steps hold a step over ``WINDOW`` (the 32-rank run's, 1.03 times): two at a time up to
    ``PAIRED`` times it; past that, one after another (two would hold far more than a plan's worth)."""
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    held = int(windows.WINDOW * windows.PAIRED) + over
    cut = [windows.Window("r", i - 1, i, i, i == 1, i == 4, held if i == 2 else 10) for i in range(1, 5)]
    names = list(windows._threaded(lambda _w, _job: threading.current_thread().name, cut, None))  # type: ignore[arg-type]
    assert len(names) == 4
    assert all(n.startswith("traceql-window") for n in names) if paired else set(names) == {"MainThread"}


def _ways_of(path) -> tuple[pl.DataFrame, dict, dict]:
    """``path``'s run as the replay reads it, and two ways of replaying it: `detect`'s (from the trace as it was,
    its stragglers) and `ranks`' (from the trace as replayed, every what-if, those stragglers but the first)."""
    req = request(path)
    timeline, labelled = req.label(req.runs()[0], None)
    ops = on_clock(with_labels(activities(timeline.kernels, timeline.memops, timeline.ranks), labelled.kernels))
    named = named_stragglers(ops.filter(pl.col("kind") == "comm"))[0].select("run_id", "step", "rank")
    assert named.height >= 2
    measured = {"waits": timeline.waits, "stragglers": named, "ways": WAYS, "replay_trace": False}
    replayed = {"waits": timeline.waits, "stragglers": named.slice(1),
                "ways": tuple(replay.WAYS), "replay_trace": True}
    return ops, measured, replayed


@pytest.mark.parametrize("size", [1, None], ids=["windows of two steps", "one window"])
def test_two_ways_replayed_from_one_read_give_what_each_gives_alone(size: int | None) -> None:
    ops, measured, replayed = _ways_of(RUNS / "gpt2-4rank-straggler-nsys")
    both = windows.windowed_modes(ops, [measured, replayed], size=size, min_steps=2)
    for got, way in zip(both, (measured, replayed), strict=True):
        alone = replay.windowed(ops, size=size, min_steps=2, **way)
        assert got is not None and got.steps.equals(alone.steps)
        assert (got.recorded, got.inferred, got.forced, got.activities) == \
            (alone.recorded, alone.inferred, alone.forced, alone.activities)
    # the two differ where the ways do: the stragglers each names, the what-ifs each asks
    assert not both[0].steps["without_straggler_ns"].equals(both[1].steps["without_straggler_ns"])
    assert both[0].steps["serialized_ns"].is_null().all() and both[1].steps["serialized_ns"].is_not_null().all()

