"""The interval of a median from order statistics (``analyzers.spread``), checked against every way ``n`` values
can fall either side of their median, and on the steps of a real run."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from traceql.analyzers.spread import LEVEL, coverage, median_bounds


def _enumerated(n: int, k: int) -> float:
    """The chance that the k-th smallest and k-th largest of n values bound their median: the share of the 2^n
    ways the values fall below or above it where at least k fall on each side."""
    hits = sum(1 for sides in itertools.product((0, 1), repeat=n) if k <= sum(sides) <= n - k)
    return hits / 2 ** n


@pytest.mark.parametrize("n", range(2, 13))
def test_coverage_is_the_share_of_ways_the_values_fall(n: int) -> None:
    for k in range(1, n // 2 + 1):
        assert coverage(n, k) == pytest.approx(_enumerated(n, k))


def test_the_widest_order_statistics_that_keep_the_level() -> None:
    steps = np.array([94.95, 103.55, 108.91, 106.26, 108.30])  # a library run's replayed steps (ms)
    low, high, cov = median_bounds(steps)
    assert (low, high) == (steps.min(), steps.max()) and cov == pytest.approx(1 - 2 / 32)  # 5 steps: 93.8 %
    many = np.arange(30.0)
    low, high, cov = median_bounds(many)
    k = int(low) + 1  # the k-th smallest
    assert cov >= LEVEL and coverage(30, k + 1) < LEVEL and high == many[30 - k]
    assert low <= float(np.median(many)) <= high


def test_one_value_and_none() -> None:
    assert median_bounds([5.0]) == (5.0, 5.0, 0.0)
    low, high, cov = median_bounds([float("nan")])
    assert np.isnan(low) and np.isnan(high) and cov == 0.0
