"""`info`'s step count as a user reads it: steps a rank, of which kinds, on how many ranks."""

from __future__ import annotations

import json

from tests.oracle import step_ranges
from tests.paths import INRUN_TRACE


def _step_ranges(path) -> set[str]:
    """The step ranges of one export, read with sqlite3 (the oracle): ``step_<i>`` and ``step_<i>_nosync``."""
    return {f"step_{step}{'_nosync' if kind == 'isolated' else ''}" for _, step, kind in step_ranges(path)}


def test_steps_are_counted_a_rank(invoke, narrow: int) -> None:
    """The in-run GPT-2 run: 2 ranks of 5 normal and 3 isolated steps each; `info` said "16 across ranks"."""
    files = sorted((INRUN_TRACE / "traces").glob("*.sqlite"))
    ranges = [_step_ranges(f) for f in files]
    isolated = {n for n in ranges[0] if n.endswith("_nosync")}
    assert len(files) == 2 and ranges[0] == ranges[1] and len(isolated) == 3 and len(ranges[0]) == 8
    text = invoke("info", INRUN_TRACE).stdout
    assert "Training steps: 8 a rank (isolated 3, sync 5) on 2 ranks" in text, text
    steps = json.loads(invoke("info", INRUN_TRACE, "--format", "json").stdout)["steps"]
    assert steps["total"] == 16 and steps["steps"] == 8 and steps["steps_by_kind"] == {"isolated": 3, "sync": 5}
    assert steps["ranks"] == 2 and steps["per_rank"] == [8, 8]
