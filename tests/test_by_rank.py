"""A run labelled a rank at a time (``traceql.labelling.by_rank``) gives the labels of the run read whole: on
every shipped run, with a rank read a window of its steps at a time, in worker processes and on a Dask
cluster; its working files are gone once it is done."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from tests.paths import DDP_FILES, DDP_TRACE, INRUN_TRACE, KINETO_TOY, NSYS, PUBLIC, RUNS, SINGLE_TRACE, corpus
from traceql.analyzers.detection.detector import SlowdownDetector
from traceql.labelling.by_rank import SCRATCH_ENV, Settings, label_by_rank, scratch
from traceql.labelling.inputs import read_baseline, read_timeline
from traceql.labelling.label import label
from traceql.labelling.result import DetectResult, StoredRows
from traceql.parallel import Pool
from traceql.sources.nsys_plan import WINDOW_ENV
from traceql.sources.shards import at_once, shards
from traceql.verdicts.pricing import price_run, price_stored

# the order of a run's kernels whatever order they were read in (a window of steps holds launches)
ORDER = ["run_id", "rank", "start_ns", "device", "stream", "end_ns"]

RUNS_SHIPPED = [
    pytest.param(DDP_TRACE, None, False, id="detector"),
    pytest.param(DDP_TRACE, SINGLE_TRACE, False, id="paired"),
    pytest.param(INRUN_TRACE, None, False, id="inrun"),
    pytest.param(INRUN_TRACE, None, True, id="inrun-single-trace"),
    pytest.param(RUNS / "gpt2-4rank-nsys", None, False, id="4-ranks"),
    pytest.param(RUNS / "gpt2-4rank-straggler-nsys", None, False, id="4-ranks-straggler"),
    pytest.param(RUNS / "gpt2-torch", None, False, id="kineto"),
    pytest.param(RUNS / "seqpar-nsys", None, False, id="sequence-parallel"),
    pytest.param(RUNS / "resnet50-inrun-nsys", None, False, id="resnet-inrun"),
    corpus(KINETO_TOY, None, False, id="kineto-toy"),
    corpus(PUBLIC / "hta-kineto" / "trace_filter", None, False, id="public-hta"),
]


def _both(run: Path, base: Path | None, single: bool, *, workers: int = 1) -> tuple[DetectResult, DetectResult]:
    """The run labelled read whole, and a rank at a time."""
    baseline = read_baseline(base) if base else None
    whole = label(read_timeline(run), baseline=baseline, single_trace=single)
    parts = shards(run)
    with scratch() as tmp, Pool(workers) as pool:
        by_rank = label_by_rank(parts, Settings(baseline, 1.2, single, False, Path(tmp)), pool=pool)
        assert not list(Path(tmp).iterdir())  # every working file removed once read
    assert isinstance(by_rank.rows, StoredRows) and len(by_rank.rows.files) == len(parts)
    return whole, by_rank


def _same(whole: DetectResult, by_rank: DetectResult, *, sort: bool = False) -> None:
    a, w = by_rank.kernels, whole.kernels
    if sort:
        a, w = a.sort(ORDER, maintain_order=True), w.sort(ORDER, maintain_order=True)
    assert a.equals(w)
    for frame in ("ranks", "steps", "top_signatures"):
        assert getattr(by_rank, frame).equals(getattr(whole, frame)), frame
    assert (by_rank.mode, by_rank.match_rate, by_rank.notes) == (whole.mode, whole.match_rate, whole.notes)


@pytest.mark.parametrize(("run", "base", "single"), RUNS_SHIPPED)
def test_rank_by_rank_gives_the_labels_of_the_whole_run(run: Path, base: Path | None, single: bool) -> None:
    whole, by_rank = _both(run, base, single)
    assert len(shards(run)) > 1
    _same(whole, by_rank)
    assert by_rank.to_dict() == whole.to_dict()


@pytest.mark.parametrize(("run", "base"), [
    pytest.param(DDP_TRACE, SINGLE_TRACE, id="paired"),
    pytest.param(INRUN_TRACE, None, id="inrun"),
    pytest.param(RUNS / "gpt2-4rank-straggler-nsys", None, id="4-ranks-straggler"),
    corpus(NSYS / "gpt2_ddp2_cap2.sqlite", None, id="two-processes-one-file"),
])
def test_windows_of_steps_give_the_labels_of_the_whole_run(monkeypatch: pytest.MonkeyPatch, run: Path,
                                                           base: Path | None) -> None:
    """A rank too large for one part is read a window of steps at a time (here: windows of 1000 kernels)."""
    monkeypatch.setenv(WINDOW_ENV, "1000")
    parts = shards(run)
    assert all(p.windowed for p in parts) and len(parts) >= 3 * len(shards(run, windows=False))
    whole, by_rank = _both(run, base, False)
    _same(whole, by_rank, sort=True)  # the rows come a window at a time


@pytest.mark.parametrize("windows", [False, True])
def test_a_forest_fitted_on_a_sample_is_the_same(monkeypatch: pytest.MonkeyPatch, windows: bool) -> None:
    """Where the judged kernels outnumber the forest's sample, only the sampled rows are read, from each shard
    (here: a sample of 1,000 of the run's 3,492; the forest draws 256 of them by place)."""
    monkeypatch.setattr("traceql.analyzers.detection.detector.FIT_SAMPLE", 1000)
    if windows:
        monkeypatch.setenv(WINDOW_ENV, "1000")
    whole, by_rank = _both(RUNS / "gpt2-4rank-straggler-nsys", None, False)
    _same(whole, by_rank, sort=windows)
    assert SlowdownDetector().fit_rows(1001) is not None  # the sample was taken


@pytest.mark.parametrize("cores", [1, 2])
def test_shards_two_at_a_time_give_the_labels_of_one_at_a_time(monkeypatch: pytest.MonkeyPatch, cores: int) -> None:
    """Nsight Systems shards (their kernels counted by the plan) run two at a time on threads where the
    process may use two cores: the same labels as the whole run, as one at a time gives them."""
    monkeypatch.setenv("OMP_NUM_THREADS", str(cores))
    run = RUNS / "gpt2-4rank-straggler-nsys"
    assert at_once(shards(run)) == cores
    whole, by_rank = _both(run, None, False)
    _same(whole, by_rank)


def test_a_shard_is_read_alone_where_its_kernels_are_many_or_uncounted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    run = RUNS / "gpt2-4rank-straggler-nsys"
    parts = shards(run)
    kernels = read_timeline(run).kernels
    assert [p.kernels() for p in parts] == kernels.group_by("rank").len().sort("rank")["len"].to_list()
    monkeypatch.setattr("traceql.sources.shards.PAIRED_KERNELS", max(p.kernels() or 0 for p in parts) - 1)
    assert at_once(parts) == 1
    assert [p.kernels() for p in shards(RUNS / "gpt2-torch")] == [None, None]  # Kineto's plan counts none
    assert at_once(shards(RUNS / "gpt2-torch")) == 1
    monkeypatch.setenv(WINDOW_ENV, "1000")  # windows of a rank's steps: each about its share of the rank's
    windows = shards(run)
    assert len(windows) > len(parts) and all(1000 <= (w.kernels() or 0) < 2000 for w in windows)


def test_worker_processes_give_the_serial_labels() -> None:
    whole, by_rank = _both(RUNS / "gpt2-4rank-nsys", None, False, workers=2)
    _same(whole, by_rank)


def test_a_4_worker_cluster_gives_the_serial_output(invoke, dask_scheduler: str, tmp_path: Path) -> None:
    """``detect`` of a run of rank files, its ranks spread over the workers of a Dask LocalCluster."""
    run = RUNS / "gpt2-4rank-straggler-nsys"
    serial = invoke("detect", run, "--out", tmp_path / "serial.parquet")
    remote = invoke("detect", run, "--out", tmp_path / "remote.parquet", "--scheduler", dask_scheduler)
    assert serial.exit_code == remote.exit_code == 0, remote.stderr
    assert remote.stdout == serial.stdout.replace("serial.parquet", "remote.parquet")
    assert remote.stderr == serial.stderr == ""
    rows = pl.read_parquet(tmp_path / "remote.parquet")
    assert rows.equals(pl.read_parquet(tmp_path / "serial.parquet"))
    assert rows.equals(label(read_timeline(run)).kernels)


def test_the_scratch_folder_must_be_a_folder(invoke, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(SCRATCH_ENV, str(tmp_path / "missing"))
    result = invoke("detect", *DDP_FILES)
    assert result.exit_code == 2
    assert result.stderr == (f"error: {tmp_path / 'missing'}: ${SCRATCH_ENV} is not a folder (the scratch folder "
                             "every worker sees)\n")


def test_the_scratch_folder_is_left_empty(invoke, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(SCRATCH_ENV, str(tmp_path))
    result = invoke("detect", DDP_TRACE, "--out", tmp_path / "rows.parquet")
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.parquet"]


@pytest.mark.parametrize("run", [DDP_TRACE, RUNS / "gpt2-4rank-straggler-nsys", RUNS / "gpt2-torch"],
                         ids=lambda p: p.name)
def test_the_critical_path_is_the_same_read_whole_or_rank_by_rank(run: Path) -> None:
    """What the cases cost on the critical path (a replay of the whole run) from the run read whole, and from
    its shards' stored activities; and it is a part of the time the cases lost in those steps."""
    timeline = read_timeline(run)
    whole = price_run(label(timeline), timeline)
    with scratch() as tmp, Pool(1) as pool:
        by_rank = label_by_rank(shards(run), Settings(None, 1.2, False, False, Path(tmp), True), pool=pool,
                                then=price_stored)
        assert not list(Path(tmp).iterdir())
    assert by_rank.critical.equals(whole.critical) and whole.critical.height == 1
    row = whole.critical.row(0, named=True)
    assert 0 < row["critical_ns"] <= row["lost_ns"] and row["steps"] >= 2


def test_a_run_replayed_a_window_of_steps_at_a_time_on_workers_prices_its_cases_alike(monkeypatch) -> None:
    """Every rank's activities read a window of two steps at a time, the windows replayed on two worker
    processes: the cases' critical path the same to the nanosecond as one replay of the whole run, and each
    cause within a few per cent (the straggler's statistics come from its window)."""
    from traceql.analyzers.replay import windows
    from traceql.commands.detect import detect

    run = RUNS / "gpt2-4rank-straggler-nsys"
    whole = detect(run)
    monkeypatch.setattr(windows, "WINDOW", 1)
    monkeypatch.setattr(windows, "MIN_STEPS", 2)
    cut = detect(run, workers=2)
    assert cut.critical.equals(whole.critical) and whole.critical.height == 1
    both = whole.causes.join(cut.causes, on=["run_id", "cause", "rank"], suffix="_w", nulls_equal=True)
    assert both.height == whole.causes.height == cut.causes.height >= 2
    assert ((both["cost_ns"] - both["cost_ns_w"]).abs() <= 0.05 * both["cost_ns"].abs() + 1).all()
