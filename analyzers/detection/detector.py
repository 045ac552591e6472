"""SlowdownDetector: labels compute kernels slowed by overlapping communication, from one trace.

A scikit-learn estimator over ``traceql.analyzers.detection.features.COLUMNS``. A kernel with a within-trace
reference that communication overlapped is a slowdown case (``predict`` → -1) when it ran longer than
``threshold`` × its estimate (by more than ``margin`` of it, 0 by default: on the ground-truth matrix the clean
estimates are unbiased, and any margin costs F1 leave-one-model-out); or, where the reference
is not clean (borrowed, corrected, contaminated: ``clean_reference`` 0), longer than ``band`` × it and its
timing among the ``contamination`` most abnormal of the overlapped kernels, by an IsolationForest fitted on
them (``fit``). The forest decides that band, where an uncertain estimate and a real slowdown meet.
Kernels with no reference (``no_reference``) are never cases.

By default the band is empty (``band`` = ``threshold``): a case's ratio is always above the threshold, the one
meaning ``--threshold`` has. On the ground-truth matrix a band from 1.1 gave a leave-one-model-out F1 of 0.876
against 0.877 without, and on none of our ten shipped and shared pairs did it score higher; the forest still
scores every judged kernel (``score``, its timing's abnormality) and decides a band a caller opens.

On a long trace the forest is fitted, and its ``contamination`` cut-off set, on a random sample of
:data:`FIT_SAMPLE` overlapped kernels (each tree sees 256 of them anyway), and only the kernels in the band
are scored to decide: the others are decided by their ratio alone.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import numpy as np
from sklearn.base import BaseEstimator, OutlierMixin
from sklearn.ensemble import IsolationForest
from sklearn.utils.validation import check_array, check_is_fitted

from traceql.analyzers.detection.features import COLUMNS, FEATURES
from traceql.analyzers.detection.threshold import PAIRED_FACTOR
from traceql.analyzers.machine import threads

RATIO, FRAC, NO_REF = COLUMNS.index("log_ratio"), COLUMNS.index("comm_overlap_frac"), COLUMNS.index("no_reference")
CLEAN = COLUMNS.index("clean_reference")
FOREST = [COLUMNS.index(c) for c in FEATURES]
MIN_FIT = 16
FIT_SAMPLE = 65_536  # overlapped kernels the forest and its cut-off are fitted on, at most
SCORE_BLOCK = 32_768  # rows below which scoring stays in one thread


def _by_row_blocks(score: Callable[[np.ndarray], np.ndarray], rows: np.ndarray, jobs: int | None) -> np.ndarray:
    """``score(rows)``, with the rows split in one block per thread (``jobs``, else :func:`threads`) scored at the
    same time: the trees' walk holds no Python lock, and each row's score is computed as in one call, so the
    result is the same to the bit (the forest's own ``n_jobs`` splits the trees instead, and sums them in
    whatever order they finish)."""
    blocks = min(jobs or threads(), len(rows) // SCORE_BLOCK)
    if blocks < 2:
        return score(rows)
    with ThreadPoolExecutor(max_workers=blocks) as pool:
        return np.concatenate(list(pool.map(score, np.array_split(rows, blocks))))


def candidates(X: np.ndarray) -> np.ndarray:
    """Which rows of the detector's columns (:data:`COLUMNS`) it judges.

    The judged rows are the overlapped kernels that have a reference: what the detector is fitted on, and what
    it scores.

    Args:
        X: the kernels' features, a row a kernel, its columns :data:`COLUMNS` in order (NaN where missing).

    Returns:
        a boolean array, a value a row: True where ``comm_overlap_frac`` > 0 (NaN counted as 0),
        ``no_reference`` < 0.5 and ``log_ratio`` is not NaN.
    """
    return cast(np.ndarray, (np.nan_to_num(X[:, FRAC]) > 0.0) & (X[:, NO_REF] < 0.5) & ~np.isnan(X[:, RATIO]))


class SlowdownDetector(OutlierMixin, BaseEstimator):
    """Single-trace slowdown labels, a scikit-learn outlier detector.

    Input columns are ``traceql.analyzers.detection.features.COLUMNS`` in order (NaN where a value is missing:
    ``log_ratio`` NaN means no estimate). ``__init__`` only stores its parameters (scikit-learn's convention);
    :meth:`fit` checks them. A judged kernel (:func:`candidates`) is a case when its ratio is above ``threshold``
    × (1 + ``margin``), or, where its reference is not clean, above ``band`` and its timing scored below the
    forest's cut-off; ``band`` = ``threshold`` (the default) leaves no band, and ``contamination`` 0 no cut-off.

    Args:
        threshold: ratio of a judged kernel's duration to its estimate above which it is a case; > 1.
        band: ratio above which the forest decides where the reference is not clean; in (1, ``threshold``].
        margin: a case's ratio must exceed ``threshold`` × (1 + ``margin``); in [0, 0.5).
        contamination: share of the kernels fitted on that score below the forest's cut-off ``offset_``; in [0, 0.5).
        n_estimators: number of trees in the IsolationForest.
        max_samples: rows each tree is fitted on (IsolationForest's; ``"auto"``: 256, or all where fewer).
        random_state: seed of the forest and of its fit sample (:meth:`fit_rows`); None: another each fit.
        n_jobs: threads scoring at once (None: ``$OMP_NUM_THREADS``, else one a core); the scores are the same.
        estimate_factors: learned factors the features' estimates use (``baselines.learned``; None: shipped).
    """

    def __init__(
        self,
        threshold: float = PAIRED_FACTOR,
        band: float = PAIRED_FACTOR,
        margin: float = 0.0,
        contamination: float = 0.05,
        n_estimators: int = 200,
        max_samples: int | str = "auto",
        random_state: int | None = 0,
        n_jobs: int | None = None,
        estimate_factors: Any = None,
    ) -> None:
        self.threshold = threshold
        self.band = band
        self.margin = margin
        self.contamination = contamination
        self.n_estimators = n_estimators
        self.max_samples = max_samples
        self.random_state = random_state
        self.n_jobs = n_jobs  # threads scoring at once (None: $OMP_NUM_THREADS, else one a core); the same scores
        self.estimate_factors = estimate_factors  # the estimates' learned factors (baselines.learned; None: shipped)

    @classmethod
    def at(cls, threshold: float) -> SlowdownDetector:
        """The default detector for ``threshold``: no band (a case's ratio is above ``threshold``).

        Args:
            threshold: the ratio of a kernel's duration to its estimate above which it is a case; also the band.

        Returns:
            a detector with ``threshold`` and ``band`` both ``threshold``, its other parameters the defaults.
        """
        return cls(threshold=threshold, band=threshold)

    def _check(self, X: Any) -> np.ndarray:
        X = check_array(X, dtype=np.float64, ensure_all_finite="allow-nan")
        if X.shape[1] != len(COLUMNS):
            raise ValueError(f"expected {len(COLUMNS)} feature columns ({', '.join(COLUMNS)}), got {X.shape[1]}")
        return cast(np.ndarray, X)

    def _candidates(self, X: np.ndarray) -> np.ndarray:
        return candidates(X)

    def fit(self, X: Any, y: Any = None) -> SlowdownDetector:
        """Fit the IsolationForest on the judged kernels' timing, and its cut-off.

        The forest is fitted on the judged rows (:func:`candidates`), or on every row where fewer than
        :data:`MIN_FIT` are judged, a sample of :data:`FIT_SAMPLE` of them where more (:meth:`fit_rows`); its
        cut-off ``offset_`` is the ``contamination`` quantile of their scores (-inf at 0). Raises ValueError
        where a parameter is out of its range or ``X`` has not the detector's columns.

        Args:
            X: the kernels' features, a row a kernel, its columns :data:`COLUMNS` in order (NaN where missing).
            y: ignored (scikit-learn's estimator API).

        Returns:
            the detector itself, fitted (``forest_``, ``offset_``, ``n_fit_``, ``n_features_in_`` set).
        """
        if self.threshold <= 1.0:
            raise ValueError(f"threshold must be > 1.0, got {self.threshold}")
        if not 1.0 < self.band <= self.threshold:
            raise ValueError(f"band must be in (1, threshold], got {self.band}")
        if not 0.0 <= self.margin < 0.5:
            raise ValueError(f"margin must be in [0, 0.5), got {self.margin}")
        if not 0.0 <= self.contamination < 0.5:
            raise ValueError(f"contamination must be in [0, 0.5), got {self.contamination}")
        X = self._check(X)
        fit_on = X[self._candidates(X)]
        fit_on = fit_on if len(fit_on) >= MIN_FIT else X
        rows = self.fit_rows(len(fit_on))
        fit_on = fit_on if rows is None else fit_on[rows]
        timing = np.nan_to_num(fit_on[:, FOREST])
        self.forest_ = IsolationForest(n_estimators=self.n_estimators, max_samples=self.max_samples,
                                       random_state=self.random_state).fit(timing)
        scores = _by_row_blocks(self.forest_.score_samples, timing, self.n_jobs)
        self.offset_ = float(np.quantile(scores, self.contamination)) if self.contamination > 0 else -np.inf
        self.n_fit_ = int(len(fit_on))
        self.n_features_in_ = X.shape[1]
        return self

    def fit_rows(self, n: int) -> np.ndarray | None:
        """Which of ``n`` judged kernels (in order) :meth:`fit` fits on.

        Fitting on those rows alone gives the same forest.

        Args:
            n: the number of judged kernels (the rows :meth:`fit` fits on, before any sample).

        Returns:
            the sorted positions of a sample of :data:`FIT_SAMPLE` of them (drawn with ``random_state``) where
            ``n`` is more; None (all of them) where it is not.
        """
        if n <= FIT_SAMPLE:
            return None
        return np.sort(np.random.default_rng(self.random_state).choice(n, FIT_SAMPLE, replace=False))

    def score_samples(self, X: Any) -> np.ndarray:
        """IsolationForest score of each kernel's timing: lower = more abnormal.

        Args:
            X: the kernels' features, a row a kernel, its columns :data:`COLUMNS` in order (NaN where missing).

        Returns:
            a float array, a score a row: the fitted forest's score of its timing columns (NaN as 0).
        """
        check_is_fitted(self)
        return _by_row_blocks(self.forest_.score_samples, np.nan_to_num(self._check(X)[:, FOREST]),
                              self.n_jobs)

    def candidate_scores(self, X: Any) -> np.ndarray:
        """:meth:`score_samples` for the kernels the detector judges (overlapped, with a reference).

        Args:
            X: the kernels' features, a row a kernel, its columns :data:`COLUMNS` in order (NaN where missing).

        Returns:
            a float array, a value a row: its score where it is judged (:func:`candidates`); NaN for the
            others, which are never cases.
        """
        X = self._check(X)
        return self._scores(X, self._candidates(X))

    def _scores(self, X: np.ndarray, rows: np.ndarray) -> np.ndarray:
        out = np.full(len(X), np.nan)
        if rows.any():
            out[rows] = self.score_samples(X[rows])
        return out

    def decision_function(self, X: Any, scores: np.ndarray | None = None) -> np.ndarray:
        """Negative for slowdown cases, positive otherwise.

        Args:
            X: the kernels' features, a row a kernel, its columns :data:`COLUMNS` in order (NaN where missing).
            scores: :meth:`candidate_scores` of the same rows, already computed: they are not computed again;
                None: the scores needed (those of the kernels in the band) are computed.

        Returns:
            a float array, a value a row: negative for a slowdown case, positive otherwise (at least 1 for a
            kernel that is not judged).
        """
        X = self._check(X)
        ratio = np.nan_to_num(X[:, RATIO], nan=-np.inf)
        above = ratio - np.log(self.threshold * (1.0 + self.margin))
        candidates = self._candidates(X)
        uncertain = np.nan_to_num(X[:, CLEAN]) < 0.5  # a clean reference's ratio decides alone
        in_band = candidates & uncertain & (ratio >= np.log(self.band)) & (above <= 0)  # where the score decides
        score = self._scores(X, in_band) if scores is None else np.where(in_band, scores, np.nan)
        score = np.nan_to_num(score, nan=np.inf)  # elsewhere the ratio alone decides
        banded = np.minimum(ratio - np.log(self.band), self.offset_ - score)
        margin = -np.maximum(above, banded)  # negative when over the threshold, or in the band and abnormal
        return cast(np.ndarray, np.where(candidates, margin, np.abs(margin) + 1.0))

    def predict(self, X: Any, scores: np.ndarray | None = None) -> np.ndarray:
        """-1 for a slowdown case, +1 otherwise.

        Only the candidates are decided (the others are never cases): on millions of rows, a fraction of the
        memory.

        Args:
            X: the kernels' features, a row a kernel, its columns :data:`COLUMNS` in order (NaN where missing).
            scores: as in :meth:`decision_function`: the rows' :meth:`candidate_scores`, already computed, or
                None.

        Returns:
            an int64 array, a label a row: -1 for a slowdown case, +1 otherwise.
        """
        X = self._check(X)
        rows = self._candidates(X)
        out = np.ones(len(X), np.int64)
        if rows.any():
            margin = self.decision_function(X[rows], None if scores is None else np.asarray(scores)[rows])
            out[rows] = np.where(margin < 0, -1, 1)
        return out
