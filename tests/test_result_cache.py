"""What a command computed, kept in the cache (``traceql.labelling.memo``): `detect`, `ranks` and `whatif` answer
the same from it as computing (JSON and rows, shipped runs of nsys and torch.profiler, stored rows and rows in
memory); a kept answer is served without labelling again; another option, a rewritten input or the switch off
computes again; a kept file naming a class outside traceql is refused; results of another traceql go;
`cache clear` takes the results too."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tests.paths import DDP_TRACE, ROOT, SINGLE_TRACE
from traceql.analyzers import replay
from traceql.analyzers.replay import windows
from traceql.analyzers.replay.activities import activities
from traceql.commands import detect as detect_command
from traceql.commands.cache import clear
from traceql.commands.detect import detect
from traceql.labelling import memo
from traceql.labelling import request as request_module
from traceql.labelling.request import request
from traceql.sources import mirror
from traceql.verdicts import ranks as ranks_verdict
from traceql.verdicts.ranks import rank_steps

RUNS = [DDP_TRACE, SINGLE_TRACE, ROOT / "datasets/runs/gpt2-4rank-straggler-nsys",
        ROOT / "datasets/runs/fsdp2-pair-torch"]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache folder of the test's own, results kept."""
    where = tmp_path / "cache"
    monkeypatch.setenv(mirror.DIR_ENV, str(where))
    monkeypatch.delenv(mirror.OFF_ENV, raising=False)
    monkeypatch.delenv(memo.OFF_ENV, raising=False)
    return where


def _results() -> list[Path]:
    return sorted(mirror.folder().glob(f"{memo.PREFIX}*"))


def _no_labelling(*_args: object, **_kw: object) -> None:
    raise AssertionError("labelled again: the kept result was not served")


@pytest.mark.parametrize("run", RUNS, ids=lambda p: p.name)
def test_each_command_answers_the_same_from_its_kept_result(run: Path, cache: Path, invoke,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    for command in ("detect", "ranks", "whatif"):
        monkeypatch.setenv(memo.OFF_ENV, "1")
        computed = invoke(command, run, "--format", "json")
        assert computed.exit_code == 0, computed.stderr
        assert not _results()  # off: nothing kept
        monkeypatch.delenv(memo.OFF_ENV)
        first, again = invoke(command, run, "--format", "json"), invoke(command, run, "--format", "json")
        assert json.loads(first.stdout) == json.loads(computed.stdout)
        assert again.stdout == computed.stdout, command
        for entry in _results():
            shutil.rmtree(entry)


@pytest.mark.parametrize("run", [DDP_TRACE, SINGLE_TRACE], ids=["rows-stored", "rows-in-memory"])
def test_a_kept_detect_is_served_rows_and_all(run: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    computed = detect(run)
    # a run labelled a rank at a time keeps its labels too (``reused``), and its replay for `detect` and `ranks`
    kept = 4 if run == DDP_TRACE else 1
    assert len(_results()) == kept
    monkeypatch.setattr(detect_command, "_labelled", _no_labelling)
    served = detect(run)
    assert served.stored == computed.stored and served.kernels.equals(computed.kernels)
    for name in ("ranks", "top_signatures", "steps", "critical", "causes", "held"):
        assert getattr(served, name).equals(getattr(computed, name)), name
    assert (served.notes, served.mode, served.match_rate) == (computed.notes, computed.mode, computed.match_rate)
    assert clear()[1] == kept  # the stored rows served are the result's own: clearing the cache leaves them
    assert not _results() and served.kernels.height == computed.compute_kernels()
    with pytest.raises(AssertionError, match="labelled again"):
        detect(run)


def test_another_option_a_rewritten_input_or_the_switch_off_computes_again(
        cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = tmp_path / "run"
    shutil.copytree(DDP_TRACE, run)
    detect(run)
    monkeypatch.setattr(detect_command, "_labelled", _no_labelling)
    detect(run)  # served
    for again in (lambda: detect(run, threshold=1.5), lambda: detect(run, top=3)):
        with pytest.raises(AssertionError, match="labelled again"):
            again()
    with monkeypatch.context() as steps:  # `--steps-from`, a setting that changes the figures
        steps.setenv("TRACEQL_STEPS_FROM", r"step_\d+")
        with pytest.raises(AssertionError, match="labelled again"):
            detect(run)
    monkeypatch.setenv("TRACEQL_SCRATCH", str(tmp_path))  # where, not what: served
    detect(run)
    monkeypatch.chdir(tmp_path)  # the same files named otherwise: what it prints of them may differ
    with pytest.raises(AssertionError, match="labelled again"):
        detect("run")
    export = next((run / "traces").glob("*rank1.sqlite"))
    stat = export.stat()
    os.utime(export, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # rewritten, same bytes
    with pytest.raises(AssertionError, match="labelled again"):
        detect(run)
    monkeypatch.setenv(mirror.OFF_ENV, "1")
    with pytest.raises(AssertionError, match="labelled again"):
        detect(DDP_TRACE)


def test_ranks_and_whatif_serve_their_replay_kept(cache: Path, invoke, monkeypatch: pytest.MonkeyPatch) -> None:
    first, real = invoke("ranks", DDP_TRACE, "--format", "json"), ranks_verdict._ranked_run
    monkeypatch.setattr(ranks_verdict, "_ranked_run", _no_labelling)
    assert invoke("ranks", DDP_TRACE, "--format", "json").stdout == first.stdout
    with pytest.raises(AssertionError, match="labelled again"):
        rank_steps(request(DDP_TRACE, threshold=1.5))
    monkeypatch.setattr(ranks_verdict, "_ranked_run", real)
    invoke("whatif", DDP_TRACE)  # its own replay (its untraced steps' share), kept on its own
    assert len(_results()) == 2


def test_a_run_labelled_a_rank_at_a_time_is_labelled_once_for_its_replays(
        cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = tmp_path / "run"
    shutil.copytree(ROOT / "datasets/runs/gpt2-4rank-straggler-nsys", run)
    req = request(run)
    (paths,) = req.runs()
    monkeypatch.setenv(memo.OFF_ENV, "1")
    computed, alone = ranks_verdict.ranked_run(req, paths, None, by_rank=True).result, detect(run)
    monkeypatch.delenv(memo.OFF_ENV)
    detect(run)  # its labels kept beside its result
    memo.labels_served()
    with monkeypatch.context() as patch:
        patch.setattr(request_module, "label_by_rank", _no_labelling)
        patch.setattr(request_module, "scratch", lambda: _no_labelling())  # served: no working folder made
        memo.replays_served()
        ranked = ranks_verdict.ranked_run(req, paths, None, by_rank=True).result  # `ranks` after `detect`
        assert len(memo.labels_served()) == 1 and len(memo.replays_served()) == 1  # detect replayed it for ranks
        assert json.dumps(ranked.to_dict(), sort_keys=True) == json.dumps(computed.to_dict(), sort_keys=True)
        for entry in _results():  # `detect` after `ranks`: its own result gone, the labels kept
            if json.loads((entry / "manifest.json").read_text())["source"].startswith("detect:"):
                shutil.rmtree(entry)
        served = detect(run)
    assert len(memo.labels_served()) == 1 and served.kernels.equals(alone.kernels)
    inodes = {(p.stat().st_dev, p.stat().st_ino): p.stat().st_size for p in cache.rglob("*") if p.is_file()}
    assert sum(e[1] for e in mirror.entries()) == sum(inodes.values())  # the rows shared with the labels: once
    for name in ("ranks", "top_signatures", "steps", "critical", "causes", "held"):
        assert getattr(served, name).equals(getattr(alone, name)), name
    assert served.notes == alone.notes
    export = next((run / "traces").glob("*rank1.sqlite"))
    stat = export.stat()
    os.utime(export, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # rewritten, same bytes
    ranks_verdict.ranked_run(req, paths, None, by_rank=True)  # a file rewritten: labelled again
    assert not memo.labels_served()


def test_ranks_replays_a_run_for_the_detect_that_follows(cache: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The first of `ranks` and `detect` on a run labelled a rank at a time replays it both ways
    (``verdicts.kept_replay``): `detect` after `ranks` replays nothing, and says the same as alone."""
    run = tmp_path / "run"
    shutil.copytree(ROOT / "datasets/runs/gpt2-4rank-straggler-nsys", run)
    req = request(run)
    (paths,) = req.runs()
    monkeypatch.setenv(memo.OFF_ENV, "1")
    alone = detect(run)
    monkeypatch.delenv(memo.OFF_ENV)
    memo.replays_served()
    ranks_verdict.ranked_run(req, paths, None, by_rank=True)
    assert not memo.replays_served()
    with monkeypatch.context() as patch:
        patch.setattr(replay, "windowed_modes", _no_labelling)  # no window replayed again
        served = detect(run)
    assert len(memo.replays_served()) == 1
    for name in ("ranks", "steps", "critical", "causes", "held"):
        assert getattr(served, name).equals(getattr(alone, name)), name
    assert served.notes == alone.notes and served.kernels.equals(alone.kernels)


def test_a_command_that_replays_its_own_way_says_no_replay_was_served(cache: Path, tmp_path: Path) -> None:
    """`ranks` whose replay is not kept, beside `detect`'s that is: it replays, and does not say it was served."""
    run = tmp_path / "run"
    shutil.copytree(ROOT / "datasets/runs/gpt2-4rank-straggler-nsys", run)
    req = request(run)
    (paths,) = req.runs()
    detect(run)
    for entry in _results():
        if json.loads((entry / "manifest.json").read_text())["source"].startswith("replay for ranks:"):
            shutil.rmtree(entry)
    memo.replays_served()
    ranks_verdict.ranked_run(req, paths, None, by_rank=True)
    assert not memo.replays_served()


def test_a_runs_stored_activities_are_kept_and_lent_in_the_scratch_folder(
        cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    req = request(ROOT / "datasets/runs/gpt2-late-nsys")
    timeline, _ = req.label(req.runs()[0], None)
    ops = activities(timeline.kernels, timeline.memops, timeline.ranks)
    files = [tmp_path / f"rank{rank}.arrow" for rank in ops["rank"].unique(maintain_order=True)]
    index = [windows.Stored.write(part, f) for part, f in zip(ops.partition_by("rank", maintain_order=True), files,
                                                              strict=True)]
    stored = windows.Stored(tuple(files), tuple(index))
    key = memo.key("labelled", files, {})
    memo.save(key, {"stored": stored}, "test")
    monkeypatch.setenv("TRACEQL_SCRATCH", str(tmp_path / "scratch"))
    (tmp_path / "scratch").mkdir()
    lent = memo.load(key)["stored"]
    assert all(f.parent.parent == tmp_path / "scratch" for f in lent.files)  # every worker reads them there
    for (b, r, n), (b2, r2, n2) in zip(stored.index, lent.index, strict=True):
        assert np.array_equal(b, b2) and np.array_equal(r, r2) and n == n2 and b2.dtype == np.int64
    assert lent.scan().collect().equals(stored.scan().collect())
    entry = next(cache.glob(f"{memo.PREFIX}*"))
    part = next(entry.glob("activities-*.arrow"))
    kept = part.read_bytes()
    part.unlink()  # its own inode: what was lent is not cut with it
    part.write_bytes(kept[: len(kept) // 2])  # cut short: no entry, the command labels again (and keeps them)
    assert memo.load(key) is None
    assert not entry.exists()  # what was lent stays
    assert lent.scan().collect().height == ops.height


def test_a_kept_file_naming_another_class_is_refused(cache: Path, tmp_path: Path) -> None:
    key = memo.key("detect", [DDP_TRACE], {"x": 1})
    memo.save(key, {"frame": pl.DataFrame({"a": [1, 2]})}, "test")
    assert memo.load(key)["frame"]["a"].to_list() == [1, 2]
    where = mirror.folder() / f"{memo.PREFIX}{key}" / "result.pickle"
    where.write_bytes(pickle.dumps(tmp_path.parent))  # a path: a class it may make
    assert memo.load(key) == tmp_path.parent
    where.write_bytes(pickle.dumps(os.system))  # a function of the system: never called, never made
    assert memo.load(key) is None
    assert not where.parent.exists()  # the entry removed: the next command keeps a whole one


def test_results_of_another_traceql_go_when_one_is_kept(cache: Path) -> None:
    memo.save(memo.key("detect", [DDP_TRACE], {"x": 1}), 1, "test")
    (old,) = _results()
    manifest = json.loads((old / "manifest.json").read_text())
    (old / "manifest.json").write_text(json.dumps({**manifest, "code": "another"}))
    memo.save(memo.key("detect", [DDP_TRACE], {"x": 2}), 2, "test")
    assert len(_results()) == 1 and not old.exists()


def test_the_code_a_result_is_kept_by_is_every_layers_code(tmp_path: Path) -> None:
    """The replay, the collectors and the commands are all in the hash a result is kept by, in a process started
    away from the checkout: a result of older analyzers is not served (the leaves are folders of their own in a
    development install, not importable by their own names there)."""
    script = ("from traceql.labelling import memo\n"
              "import traceql.collectors.manifest as c, traceql.commands.detect as d\n"
              "from traceql.analyzers.replay import engine as e\n"
              "hashed = {str(p.resolve()) for _, p in memo.code_files()}\n"
              "print(sorted(str(__import__('pathlib').Path(m.__file__).resolve()) in hashed for m in (c, d, e)))\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    got = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                         check=True)
    assert got.stdout.strip() == "[True, True, True]"


def test_cache_info_lists_the_results(cache: Path, invoke, monkeypatch: pytest.MonkeyPatch) -> None:
    first = invoke("detect", SINGLE_TRACE)
    again = invoke("detect", SINGLE_TRACE)  # says where its answer came from, then the same
    assert "answered from the cache" not in first.stdout and again.stderr == ""
    said, rest = again.stdout.split("computes it again)\n", 1)
    assert said.startswith("note: answered from the cache, as computed on") and rest == first.stdout
    assert "answered from the cache" not in invoke("detect", SINGLE_TRACE, "--format", "json").stdout
    data = json.loads(invoke("cache", "info", "--format", "json").stdout)
    assert [r["of"] for r in data["results"]] == [f"detect: {SINGLE_TRACE}"] and len(data["copies"]) == 1
    assert data["bytes"] == sum(p.stat().st_size for p in cache.rglob("*") if p.is_file())
    monkeypatch.setenv("COLUMNS", "400")
    text = invoke("cache", "info").stdout
    assert "1 copy, 1 result," in text and f"detect: {SINGLE_TRACE}" in text
    monkeypatch.setenv(memo.OFF_ENV, "1")
    assert "results off (TRACEQL_NO_RESULT_CACHE)" in invoke("cache", "info").stdout
    assert invoke("cache", "clear").stdout.startswith("removed 1 copy and 1 result")


def test_commands_keeping_one_result_at_once_keep_it_once(cache: Path) -> None:
    key = memo.key("detect", [DDP_TRACE], {"x": 3})
    frame = pl.DataFrame({"a": list(range(100_000))})
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda i: memo.save(key, {"frame": frame, "i": i}, "race"), range(8)))
    assert len(_results()) == 1 and not list(cache.glob(".*"))  # one in place, no folder left half-written
    got = memo.load(key)
    assert got["frame"].equals(frame) and got["i"] in range(8)
