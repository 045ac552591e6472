"""Opening a trace and summarizing it does no per-row Python work: DuckDB and polars do it.

Counted with cProfile: the number of Python function calls must not grow with the number of kernels.
"""

from __future__ import annotations

import cProfile
import pstats
import shutil
import sqlite3
from pathlib import Path

import pytest

import traceql
from tests.paths import DDP_FILE, NSYS


def python_calls(path: Path) -> int:
    prof = cProfile.Profile()
    prof.enable()
    with traceql.read_trace(path) as trace:
        traceql.trace_info(trace)
    prof.disable()
    return pstats.Stats(prof).total_calls  # type: ignore[attr-defined]


def test_python_calls_do_not_grow_with_kernels(tmp_path: Path) -> None:
    # the same real trace with its kernel table repeated four times (each copy shifted in time: exact
    # duplicate rows would be dropped as such)
    big = tmp_path / "gpt2_x4.sqlite"
    shutil.copyfile(DDP_FILE, big)
    con = sqlite3.connect(big)
    for shift in (10**12, 2 * 10**12):
        n = con.execute("SELECT max(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
        con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL")
        con.execute('UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = start + ?, "end" = "end" + ? WHERE rowid > ?',
                    [shift, shift, n])
    con.commit()
    con.close()
    for p in (DDP_FILE, big):
        python_calls(p)  # warm imports and caches
    small, large = python_calls(DDP_FILE), python_calls(big)
    with traceql.read_trace(big) as t, traceql.read_trace(DDP_FILE) as t1:
        assert t.sql("SELECT count(*) FROM kernels").item() == 4 * t1.sql("SELECT count(*) FROM kernels").item()
    assert large < small * 1.05 + 200, (small, large)


@pytest.mark.corpus
def test_19k_kernel_export_costs_what_a_quarter_of_it_costs(tmp_path: Path) -> None:
    gpt2 = NSYS / "gpt2_ddp2_cap2.sqlite"  # a real 19,060-kernel export
    quarter = tmp_path / "quarter.sqlite"
    shutil.copyfile(gpt2, quarter)
    con = sqlite3.connect(quarter)
    con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid % 4 != 0")
    con.commit()
    con.close()
    for p in (quarter, gpt2):
        python_calls(p)
    small, large = python_calls(quarter), python_calls(gpt2)
    assert large < small * 1.05 + 200, (small, large)
