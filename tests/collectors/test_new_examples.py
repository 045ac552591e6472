"""`traceql collect` on the BERT and ViT examples, on CPU: 2 gloo DDP ranks, timing only, one epoch. Each
shrinks to its tiny CPU shape and trains through the real command line to a complete run folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.paths import TINY

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("example", ["bert", "vit"])
def test_the_example_collects_on_two_cpu_ranks(invoke, tmp_path: Path, example: str) -> None:
    out = tmp_path / example
    result = invoke("collect", TINY.parent / example, "--device", "cpu", "--profiler", "none", "--set", "epochs=1",
                    "--out", out, "--timeout", "120")
    assert result.exit_code == 0, result.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["device"] == "cpu" and manifest["world_size"] == 2
    assert [(r["rank"], r["status"]) for r in manifest["ranks"]] == [(0, "ok"), (1, "ok")]
    assert all(r["steps"] == 8 and r["window_median_ms"] > 0 for r in manifest["ranks"])  # 1 epoch of 8 batches
    for rank in (0, 1):
        results = json.loads((out / "results" / f"rank{rank}.json").read_text())
        assert results["status"] == "ok" and results["backend"] == "gloo" and results["world_size"] == 2
        times = results["step_times_ms"]
        assert len(times) == 8 and all(t["ms"] > 0 for t in times) and any(t["window"] for t in times)
