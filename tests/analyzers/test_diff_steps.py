"""`diff` pairs the compute kernels of normal steps alone: an in-run collection's isolated steps
(``step_<i>_nosync``, communication off) are its reference, not steps to compare. Counted with sqlite3 over the
exports' NVTX step ranges (``tests.oracle.nsys_steps``)."""

from __future__ import annotations

from collections import Counter

from tests.oracle import exports, nsys_steps, read_kernels
from tests.paths import INRUN_TRACE
from traceql.commands.diff import diff


def step_kernels(path) -> Counter:
    """``(rank, step, kind) → compute kernels`` launched in each NVTX step range, rank by export (in rank order)."""
    out: Counter = Counter()
    for rank, f in enumerate(exports(path)):
        where = nsys_steps(f)
        for k in read_kernels(f):
            step = where.get(((k["pid"] >> 24) & 0xFFFFFF, k["corr"]))
            if step is not None and not k["comm"]:
                out[(rank, *step)] += 1
    return out


def test_diff_pairs_the_normal_steps_kernels_only() -> None:
    truth = step_kernels(INRUN_TRACE)
    normal = {(rank, step): n for (rank, step, kind), n in truth.items() if kind == "sync"}
    isolated = sum(n for (_, _, kind), n in truth.items() if kind == "isolated")
    assert isolated > 1000  # the run interleaves isolated steps: kernels the pairing must leave out
    result = diff(INRUN_TRACE, INRUN_TRACE)
    got = Counter(zip(result.pairs["rank"].to_list(), result.pairs["step"].to_list(), strict=True))
    assert dict(got) == normal
    totals = result.kernel_totals()
    # the run against itself: every normal-step kernel pairs, nothing is new or removed
    assert (totals["paired"], totals["new"], totals["removed"]) == (sum(normal.values()), 0, 0)
    assert totals["paired_before_ns"] == totals["paired_after_ns"]
