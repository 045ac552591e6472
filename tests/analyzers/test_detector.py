"""SlowdownDetector: scikit-learn conventions, determinism, its within-trace references, and its score
against twin labels on every pair we have (its isolated steps hidden from it)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from tests.paths import DDP_TRACE, INRUN_SINGLE, INRUN_TRACE, NSYS, RUNS, SINGLE_TRACE, corpus
from traceql.analyzers.detection.detector import SlowdownDetector
from traceql.analyzers.detection.features import COLUMNS
from traceql.commands.detect import detect

SHARED = ["toy_ddp2_cap25", "toy_ddp2_cap2", "gpt2_ddp2_cap25", "gpt2_ddp2_cap2"]


def f1(pred: pl.Series, truth: pl.Series) -> float:
    tp = int((pred & truth).sum())
    return 2 * tp / (int(pred.sum()) + int(truth.sum()))


def single_trace_f1(trace, iso) -> float:
    """F1 of the detector's labels (isolated steps hidden) against twin labels, over the normal steps."""
    truth = detect(trace, baseline=[iso]).kernels
    pred = detect(trace, single_trace=True).kernels
    normal = truth["baseline_kind"] != "reference"
    return f1(pred["is_slowdown"].filter(normal), truth["is_slowdown"].filter(normal))


def test_estimator_conventions() -> None:
    det = SlowdownDetector(threshold=1.3, random_state=5)
    assert det.get_params()["threshold"] == 1.3 and not hasattr(det, "forest_")
    assert clone(det).get_params() == det.get_params()
    with pytest.raises(NotFittedError):
        det.score_samples(np.zeros((3, len(COLUMNS))))
    with pytest.raises(ValueError, match="feature columns"):
        det.fit(np.zeros((20, 2)))
    with pytest.raises(ValueError, match="threshold"):
        SlowdownDetector(threshold=0.9).fit(np.zeros((20, len(COLUMNS))))
    with pytest.raises(ValueError, match="band"):
        SlowdownDetector(band=1.3).fit(np.zeros((20, len(COLUMNS))))


def test_the_rule_and_the_band() -> None:
    """Above the threshold a case; in the band only when the forest calls it abnormal; never without a
    reference or overlap."""
    rng = np.random.default_rng(0)
    n = 400
    X = np.zeros((n, len(COLUMNS)))
    X[:, COLUMNS.index("log_ratio")] = np.log(rng.uniform(0.95, 1.05, n))
    X[:, COLUMNS.index("log_duration")] = np.log(rng.uniform(1e3, 1e5, n))
    X[:, COLUMNS.index("comm_overlap_frac")] = 1.0
    X[:5, COLUMNS.index("log_ratio")] = np.log(1.5)  # clearly slowed
    X[5:10, COLUMNS.index("log_ratio")] = np.log(1.15)  # in the band, and slower than their key too: abnormal
    X[5:10, COLUMNS.index("log_key_ratio")] = np.log(1.4)
    X[10, COLUMNS.index("no_reference")] = 1.0
    X[10, COLUMNS.index("log_ratio")] = np.log(2.0)
    X[11, COLUMNS.index("comm_overlap_frac")] = 0.0
    X[11, COLUMNS.index("log_ratio")] = np.log(2.0)
    X[12, COLUMNS.index("log_ratio")] = np.nan
    det = SlowdownDetector(band=1.1, contamination=0.02).fit(X)
    pred = det.predict(X)
    assert (pred[:10] == -1).all() and (pred[10:13] == 1).all() and (pred[13:] == 1).all()
    assert (SlowdownDetector().fit(X).predict(X)[5:10] == 1).all()  # without the band (the default): not cases
    scores = det.candidate_scores(X)
    assert np.isnan(scores[10:13]).all() and not np.isnan(scores[:10]).any()  # judged: overlapped, a reference
    assert (det.predict(X, scores) == pred).all()  # the scores given, not computed again: the same labels
    assert (pred == np.where(det.decision_function(X) < 0, -1, 1)).all()  # candidates alone decided: the same
    wrong = np.where(np.isnan(scores), np.nan, 1.0)  # every kernel normal to the forest: the band is no case
    assert (det.predict(X, wrong)[5:10] == 1).all() and (det.predict(X, wrong)[:5] == -1).all()


def test_labels_are_deterministic_and_follow_the_rule() -> None:
    a = detect(DDP_TRACE).kernels
    b = detect(DDP_TRACE).kernels
    assert a["is_slowdown"].to_list() == b["is_slowdown"].to_list()
    assert a["score"].to_list() == b["score"].to_list()
    assert a["label_source"].unique().to_list() == ["detector"]
    cases = a.filter(pl.col("is_slowdown"))
    assert cases.height > 100 and set(cases["baseline_kind"]) == {"estimate"}
    assert (cases["comm_overlap_ns"] > 0).all() and (cases["slowdown_ratio"] > 1.1).all()
    assert (a.filter(pl.col("baseline_kind") == "none")["baseline_ns"].is_null()).all()


def test_ddp_bucket_copies_have_no_reference() -> None:
    """The kernels the isolated run lacks are DDP's gradient copies; the detector finds them in the trace
    alone and says it has no reference for them."""
    truth = detect(DDP_TRACE, baseline=[SINGLE_TRACE]).kernels
    single = detect(DDP_TRACE).kernels
    no_twin = truth["baseline_kind"] == "none"
    assert no_twin.sum() > 1000
    assert (single["baseline_kind"].filter(no_twin) == "none").all()
    assert single["name"].filter(single["baseline_kind"] == "none").cast(pl.String).str.contains("MulFunctor").all()


@pytest.mark.parametrize("name", [corpus(n, id=n) for n in SHARED])
def test_single_trace_f1_on_each_shared_pair(name: str) -> None:
    """Measured (this test's way, every normal-step kernel): 0.978 / 0.906 / 0.979 / 0.878; each must reach
    0.85."""
    assert single_trace_f1(NSYS / f"{name}.sqlite", NSYS / f"{name.split('_')[0]}_single.sqlite") >= 0.85


@pytest.mark.corpus
def test_single_trace_mean_f1_over_the_shared_pairs() -> None:
    scores = [single_trace_f1(NSYS / f"{n}.sqlite", NSYS / f"{n.split('_')[0]}_single.sqlite") for n in SHARED]
    assert np.mean(scores) >= 0.90 and min(scores) >= 0.80


@pytest.mark.parametrize("trace,iso,floor", [
    (DDP_TRACE, SINGLE_TRACE, 0.90), (INRUN_TRACE, INRUN_SINGLE, 0.90),
    (RUNS / "gpt2-4rank-cap2-nsys", INRUN_SINGLE, 0.90),
    (RUNS / "llama-4rank-cap25-nsys", RUNS / "llama-single-nsys", 0.85),
    (RUNS / "llama-4rank-straggler-nsys", RUNS / "llama-single-nsys", 0.85),
], ids=["embedded", "in-run, isolated steps hidden", "gpt2 4 GPUs cap2", "llama 4 GPUs", "llama 4 GPUs straggler"])
def test_single_trace_f1_on_our_pairs(trace, iso, floor: float) -> None:
    """Measured (this test's way, every normal-step kernel): 0.984 (embedded), 0.986 (in-run), 0.933 (GPT-2,
    4 GPUs, 2 MB buckets), 0.901 and 0.907 (Llama-style, 4 GPUs). Not here: the Llama-style model at 2 MB
    buckets on 4 GPUs, 0.503 (0.372 before the intercept of duration against overlap took the backward's
    GEMMs), where every instance of the backward's kernels runs beside an all-reduce (no unslowed instance to
    estimate from; its in-run labels reach 0.944)."""
    assert single_trace_f1(trace, iso) >= floor


def test_scores_in_row_blocks_equal_one_call() -> None:
    """Long inputs are scored in one block of rows per core at once: the same scores, to the bit, as the
    forest scoring every row in one call."""
    from traceql.analyzers.detection.detector import FOREST, SCORE_BLOCK

    rng = np.random.default_rng(3)
    n = 2 * SCORE_BLOCK + 101
    X = np.zeros((n, len(COLUMNS)))
    X[:, COLUMNS.index("log_ratio")] = rng.normal(0.0, 0.1, n)
    X[:, COLUMNS.index("log_duration")] = rng.uniform(5.0, 12.0, n)
    X[:, COLUMNS.index("comm_overlap_frac")] = 1.0
    det = SlowdownDetector(n_estimators=20).fit(X)
    one_call = det.forest_.score_samples(np.nan_to_num(X[:, FOREST]))
    assert np.array_equal(det.score_samples(X), one_call)
    for jobs in (1, 3):  # a worker's share of the cores: as many blocks as threads, the same scores
        assert np.array_equal(det.set_params(n_jobs=jobs).score_samples(X), one_call)


def test_scoring_threads_follow_omp_num_threads(monkeypatch) -> None:
    """A local worker is given its share of the cores as OMP_NUM_THREADS: the detector scores on that many
    threads by default; unset or not a positive number, on one a core."""
    from traceql.analyzers.machine import cores, threads

    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert threads() == 3
    for bad in ("", "0", "two"):
        monkeypatch.setenv("OMP_NUM_THREADS", bad)
        assert threads() == cores()


@pytest.mark.parametrize(("trace", "threshold"), [(RUNS / "gpt2-4rank-nsys", 1.2), (INRUN_TRACE, 1.2),
                                                  (RUNS / "gpt2-4rank-nsys", 1.5),
                                                  corpus(NSYS / "gpt2_ddp2_cap2.sqlite", 1.2, id="gpt2_ddp2_cap2")])
def test_every_case_is_at_least_the_threshold(trace, threshold: float) -> None:
    """`--threshold` means one thing whatever labelled the run (the detector, the trace's own isolated steps):
    a case's duration is at least the threshold times its baseline, and so the median ratio of every slowed
    signature `detect` lists."""
    result = detect(trace, threshold=threshold)
    cases = result.kernels.filter(pl.col("is_slowdown"))
    assert cases.height > 50
    assert (cases["duration_ns"] >= threshold * cases["baseline_ns"] - 1).all()
    assert (result.top_signatures["median_ratio"] >= threshold).all()
