"""The labelling commands' options that need more than a type: checked here, once. Loads without polars (the
command line shows these defaults)."""

from __future__ import annotations

import math

from traceql.analyzers.detection.threshold import PAIRED_FACTOR
from traceql.errors import OptionError

__all__ = ["NO_CHANGE_PCT", "PAIRED_FACTOR", "TOP", "finite", "threshold"]

TOP = 10  # the slowed signatures a result lists (`detect --top`)


# `diff`: a median step time within ±2 % of BEFORE's is "no change". On the shared H200 corpus the median step
# time of one run varies by up to 0.57 % (bootstrap SD over its steps and ranks), so that of a difference of
# two runs by about 0.6-0.8 %: 2 % is some three of those. (Here, not in analyzers.diff: the command line
# shows it as a default without loading polars.)
NO_CHANGE_PCT = 2.0


def finite(value: float | None, option: str) -> float | None:
    """``value`` (None passes), unless it is NaN or infinite: no comparison with it means anything."""
    if value is not None and not math.isfinite(value):
        raise OptionError(f"{option} must be a finite number, got {value}")
    return value


def threshold(value: float) -> float:
    """A slowdown ratio: above 1.0, finite."""
    finite(value, "--threshold")
    if not value > 1.0:
        raise OptionError(f"--threshold must be above 1.0 (a slowdown ratio), got {value}")
    return value
