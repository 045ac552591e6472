"""The detector's reference for a kernel is the first that holds, in the order of ``within_trace``'s table:
the position's clean median (clean), its shortest instance if overlapped under a tenth (contaminated), the
key's clean median (borrowed), the correction's intercept (corrected), the shortest instance whatever its
overlap (contaminated), else none. Checked rung by rung on statistics made here, and on every kernel of the
embedded run against that order worked out in plain Python from the kernel's statistics."""

from __future__ import annotations

import math

import polars as pl

from tests.paths import DDP_TRACE
from traceql.analyzers.baselines.within_trace import NEARLY_CLEAN, with_estimates, within_trace_estimates
from traceql.analyzers.overlap import comm_overlap
from traceql.labelling.inputs import read_timeline

KIND = {"position": "clean", "position-min": "contaminated", "key": "borrowed", "corrected": "corrected",
        "none": "none"}


def _value(v: float | None) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else v


def first_reference(clean: float | None, least: float | None, frac: float | None, key: float | None,
                    corrected: float | None) -> tuple[str, float | None]:
    """(source, estimate) by the table's order: the first that holds."""
    clean, least, frac, key, corrected = map(_value, (clean, least, frac, key, corrected))
    for source, value in (("position", clean),
                          ("position-min", least if frac is not None and frac < NEARLY_CLEAN else None),
                          ("key", key), ("corrected", corrected), ("position-min", least)):
        if value is not None:
            return source, value
    return "none", None


# one kernel a row, each at its own position and key: (position clean median, shortest instance, its overlap
# fraction, key clean median, corrected); None where the statistic does not hold
RUNGS = [(10.0, 8.0, 0.05, 12.0, 9.0), (None, 8.0, 0.05, 12.0, 9.0), (None, 8.0, 0.5, 12.0, 9.0),
         (None, 8.0, 0.5, None, 9.0), (None, 8.0, 0.5, None, None), (None, None, None, 12.0, None),
         (None, None, None, None, None)]


def test_each_rung_of_the_reference_order() -> None:
    n = len(RUNGS)
    ids = {"run_id": ["r"] * n, "replica": [0] * n}
    kernels = pl.DataFrame({**ids, "position": range(n), "key": [f"k{i}" for i in range(n)]},
                           schema_overrides={"replica": pl.Int32, "position": pl.Int64})
    stats = pl.DataFrame({**ids, "position": range(n), "position_clean_ns": [r[0] for r in RUNGS],
                          "position_min_ns": [r[1] for r in RUNGS], "position_min_frac": [r[2] for r in RUNGS],
                          "corrected_ns": [r[4] for r in RUNGS]},
                         schema_overrides={"replica": pl.Int32, "position": pl.Int64, "position_clean_ns": pl.Float64,
                                           "position_min_ns": pl.Float64, "position_min_frac": pl.Float64,
                                           "corrected_ns": pl.Float64})
    keys = pl.DataFrame({**ids, "key": [f"k{i}" for i in range(n)], "key_clean_ns": [r[3] for r in RUNGS]},
                        schema_overrides={"replica": pl.Int32, "key_clean_ns": pl.Float64})
    got = with_estimates(kernels, stats, keys)
    want = [first_reference(*r) for r in RUNGS]
    assert want == [("position", 10.0), ("position-min", 8.0), ("key", 12.0), ("corrected", 9.0),
                    ("position-min", 8.0), ("key", 12.0), ("none", None)]
    assert list(zip(got["estimate_source"], got["estimate_ns"], strict=True)) == want
    assert got["reference_kind"].to_list() == ["clean", "contaminated", "borrowed", "corrected", "contaminated",
                                               "borrowed", "none"]


def test_every_kernel_of_the_embedded_run_takes_the_first_reference_that_holds() -> None:
    kernels = comm_overlap(read_timeline(DDP_TRACE).kernels).with_row_index("_row")
    got = within_trace_estimates(kernels)
    columns = ["position_clean_ns", "position_min_ns", "position_min_frac", "key_clean_ns", "corrected_ns"]
    want = [first_reference(*row) for row in got.select(columns).iter_rows()]
    assert list(zip(got["estimate_source"], got["estimate_ns"], strict=True)) == want
    assert got["reference_kind"].to_list() == [KIND[source] for source, _ in want]
    # the run has kernels where the order decides: a nearly clean shortest instance and a key median both hold
    both = got.filter(pl.col("position_clean_ns").is_null() & (pl.col("position_min_frac") < NEARLY_CLEAN)
                      & pl.col("key_clean_ns").is_not_null() & (pl.col("key_clean_ns") != pl.col("position_min_ns")))
    assert both.height >= 50
