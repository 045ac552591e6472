"""Opening a trace and summarizing it does no per-row Python work: DuckDB and polars do it.

Counted with cProfile: the number of Python function calls must not grow with the number of kernels.
"""

from __future__ import annotations

import cProfile
import pstats
import shutil
import sqlite3
from pathlib import Path

import traceql
from tests.conftest import DDP_TRACE, H200


def python_calls(path: Path) -> int:
    prof = cProfile.Profile()
    prof.enable()
    with traceql.read_trace(path) as trace:
        traceql.trace_info(trace)
    prof.disable()
    return pstats.Stats(prof).total_calls  # type: ignore[attr-defined]


def test_python_calls_do_not_grow_with_kernels(tmp_path: Path) -> None:
    # the same real trace with its kernel table repeated four times
    big = tmp_path / "toy_x4.sqlite"
    shutil.copyfile(DDP_TRACE, big)
    con = sqlite3.connect(big)
    for _ in range(2):
        con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL")
    con.commit()
    con.close()
    for p in (DDP_TRACE, big):
        python_calls(p)  # warm imports and caches
    small, large = python_calls(DDP_TRACE), python_calls(big)
    with traceql.read_trace(big) as t:
        assert t.sql("SELECT count(*) FROM kernels").item() == 4 * 11780
    assert large < small * 1.05 + 200, (small, large)
    gpt2 = H200 / "nsys" / "gpt2_ddp2_cap2.sqlite"  # a real 19,060-kernel export, when present
    if gpt2.exists():
        assert python_calls(gpt2) < small * 1.05 + 200
