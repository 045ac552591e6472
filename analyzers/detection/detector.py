"""SlowdownDetector: labels compute kernels slowed by overlapping communication, from one trace.

A scikit-learn estimator. ``fit`` learns, with an IsolationForest, how the timing of kernels that no
communication overlapped normally varies (features ``log_ratio``, ``log_duration``, ``robust_z``). A kernel
is a slowdown case (``predict`` → -1) when communication overlapped it, it ran longer than ``threshold`` ×
its signature's within-trace unslowed estimate, and its timing is more unusual than ``normal_quantile`` of
the unoverlapped kernels (IsolationForest score below ``offset_``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, OutlierMixin
from sklearn.ensemble import IsolationForest
from sklearn.utils.validation import check_array, check_is_fitted

from analyzers.detection.features import FEATURES

LOG_RATIO, FRAC = FEATURES.index("log_ratio"), FEATURES.index("comm_overlap_frac")
FOREST_COLS = [FEATURES.index(c) for c in ("log_ratio", "log_duration", "robust_z")]
MIN_REFERENCE = 16


class SlowdownDetector(OutlierMixin, BaseEstimator):
    """Single-trace slowdown labels; input columns are ``analyzers.features.FEATURES`` in that order."""

    def __init__(
        self,
        threshold: float = 1.2,
        normal_quantile: float = 0.5,
        n_estimators: int = 200,
        max_samples: int | str = "auto",
        random_state: int | None = 0,
    ) -> None:
        self.threshold = threshold
        self.normal_quantile = normal_quantile
        self.n_estimators = n_estimators
        self.max_samples = max_samples
        self.random_state = random_state

    def _check(self, X: Any) -> np.ndarray:
        X = check_array(X, dtype=np.float64, ensure_all_finite=True)
        if X.shape[1] != len(FEATURES):
            raise ValueError(f"expected {len(FEATURES)} feature columns ({', '.join(FEATURES)}), got {X.shape[1]}")
        return X

    def fit(self, X: Any, y: Any = None) -> SlowdownDetector:
        if self.threshold <= 1.0:
            raise ValueError(f"threshold must be > 1.0, got {self.threshold}")
        if not 0.0 < self.normal_quantile <= 1.0:
            raise ValueError(f"normal_quantile must be in (0, 1], got {self.normal_quantile}")
        X = self._check(X)
        clean = X[:, FRAC] <= 0.0
        reference = X[clean] if clean.sum() >= MIN_REFERENCE else X
        self.forest_ = IsolationForest(
            n_estimators=self.n_estimators, max_samples=self.max_samples, random_state=self.random_state
        ).fit(reference[:, FOREST_COLS])
        self.offset_ = float(np.quantile(self.forest_.score_samples(reference[:, FOREST_COLS]), self.normal_quantile))
        self.n_reference_ = int(len(reference))
        self.n_features_in_ = X.shape[1]
        return self

    def score_samples(self, X: Any) -> np.ndarray:
        """IsolationForest score of each kernel's timing: lower = more abnormal."""
        check_is_fitted(self)
        return self.forest_.score_samples(self._check(X)[:, FOREST_COLS])

    def decision_function(self, X: Any) -> np.ndarray:
        """Negative for slowdown cases, positive otherwise."""
        X = self._check(X)
        margin = np.maximum(np.log(self.threshold) - X[:, LOG_RATIO], self.score_samples(X) - self.offset_)
        return np.where(X[:, FRAC] > 0.0, margin, np.abs(margin) + 1e-12)

    def predict(self, X: Any) -> np.ndarray:
        """-1 for a slowdown case, +1 otherwise."""
        return np.where(self.decision_function(X) < 0, -1, 1)
