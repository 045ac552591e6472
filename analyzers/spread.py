"""Bounds for a figure taken over a run's steps: how far the steps themselves let its median be known.

:func:`median_bounds` is the distribution-free interval of a median from order statistics: with ``n`` values,
the ``k``-th smallest and the ``k``-th largest bound the median with probability
``1 - 2 * P(Binomial(n, 1/2) < k)``, the largest ``k`` that keeps that probability at ``level`` or above
(five steps: the least and the greatest, 93.8 %; fewer: the least and the greatest, said by ``coverage``).
No assumption about how step times spread, which matters where a run's steps move by tens of milliseconds.
"""

from __future__ import annotations

from math import comb

import numpy as np

LEVEL = 0.95


def coverage(n: int, k: int) -> float:
    """The probability that the ``k``-th smallest and ``k``-th largest of ``n`` values bound their median."""
    return 1.0 - 2.0 * sum(comb(n, i) for i in range(k)) / 2.0 ** n


def median_bounds(values: np.ndarray | list[float], level: float = LEVEL) -> tuple[float, float, float]:
    """The interval (low, high) of the median of ``values`` and its coverage: the order statistics of the
    module doc. One value: that value twice, coverage 0. NaNs are left out."""
    v = np.sort(np.asarray(values, dtype=np.float64))
    v = v[~np.isnan(v)]
    n = len(v)
    if n == 0:
        return float("nan"), float("nan"), 0.0
    k = 1
    while k + 1 <= n // 2 and coverage(n, k + 1) >= level:
        k += 1
    return float(v[k - 1]), float(v[n - k]), coverage(n, k) if n > 1 else 0.0
