"""`--steps-from REGEX`: steps marked by any range a pattern matches, everywhere steps are used; checked against
the ranges and launches themselves (sqlite3 over the exports, the JSON of a torch.profiler trace)."""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter

import pytest

from tests.oracle import rows
from tests.paths import DDP_FILES, RUNS

SORT = "^cub::DeviceRadixSort$"  # a range each step of the embedded run opens once, a few kernels inside it


def _launched_inside(export, text: str) -> Counter:
    """Per range of ``text`` on the export's CPU (numbered 1, 2, ... as they start), the kernels whose launch call
    began inside it (the oracle of step attribution)."""
    ranges = rows(export, "SELECT e.start, e.end FROM NVTX_EVENTS e LEFT JOIN StringIds s ON e.textId = s.id "
                          f"WHERE coalesce(e.text, s.value) = '{text}' AND e.end > e.start ORDER BY e.start")
    launches = rows(export, "SELECT r.start FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
                            "ON r.correlationId = k.correlationId AND r.globalTid >> 24 = k.globalPid >> 24")
    found: Counter = Counter()
    for at in launches:
        for i, (start, end) in enumerate(ranges, 1):
            if start <= at[0] <= end:
                found[i] += 1
    return found


def test_a_range_without_a_number_marks_steps_in_order(invoke) -> None:
    """The embedded run's cub::DeviceRadixSort ranges as its steps: each rank's five, numbered by their order,
    each holding the kernels launched inside it."""
    sql = "SELECT rank, step, count(*) AS n FROM kernels WHERE step IS NOT NULL GROUP BY ALL ORDER BY ALL"
    got = json.loads(invoke("query", sql, "--format", "json", "--steps-from", SORT).stdout)
    want = [{"rank": rank, "step": step, "n": n} for rank, export in enumerate(DDP_FILES)
            for step, n in sorted(_launched_inside(export, "cub::DeviceRadixSort").items())]
    assert got == want and len(want) == 10


def test_the_default_markers_given_as_a_pattern_are_the_same_steps(invoke) -> None:
    default = json.loads(invoke("ranks", "--format", "json").stdout)["steps"]
    given = json.loads(invoke("ranks", "--format", "json", "--steps-from", r"^step_([0-9]+)$").stdout)["steps"]
    assert [(s["rank"], s["step"], s["gpu_ns"]) for s in given] == [(s["rank"], s["step"], s["gpu_ns"])
                                                                  for s in default]
    again = json.loads(invoke("ranks", "--format", "json").stdout)["steps"]  # nothing leaks into the next run
    assert again == default


def test_profiler_steps_of_a_torch_trace(invoke) -> None:
    """gpt2-torch has NVTX-like step_<i> annotations and torch.profiler's ProfilerStep#<i>; marked by the latter,
    its steps are the numbers its JSON holds for rank 0."""
    trace = sorted((RUNS / "gpt2-torch" / "traces").glob("*rank0*.json.gz"))[0]
    with gzip.open(trace) as fh:
        events = json.load(fh)["traceEvents"]
    numbers = sorted({int(m[1]) for e in events if e.get("cat") == "user_annotation"
                      and (m := re.fullmatch(r"ProfilerStep#(\d+)", e.get("name", "")))})
    sql = "SELECT DISTINCT step FROM steps WHERE rank = 0 ORDER BY step"
    got = json.loads(invoke("query", RUNS / "gpt2-torch", sql, "--format", "json", "--steps-from",
                            r"^ProfilerStep#([0-9]+)$").stdout)
    assert [r["step"] for r in got] == numbers and numbers


@pytest.mark.parametrize(("pattern", "phrase"), [("(", "is not a regular expression"),
                                                 ("a(?=b)", "is not a regular expression"),
                                                 ("(a)(b)", "at most one capture group")])
def test_a_bad_pattern_is_one_line_and_exit_2(invoke, pattern: str, phrase: str) -> None:
    result = invoke("ranks", "--steps-from", pattern)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1 and phrase in result.stderr, result.stderr


def test_a_pattern_that_matches_nothing_says_so(invoke) -> None:
    result = invoke("whatif", "--steps-from", "^no such range$")
    assert result.exit_code == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "no steps to replay (no ranges matching --steps-from '^no such range$')" in text, text
