"""traceql against Holistic Trace Analysis 0.5.0 on Kineto traces (numbers stored by bench/hta_oracle.py)."""

from __future__ import annotations

import json

import pytest

from tests.paths import KINETO_TOY, ROOT, SHARED
from traceql.commands.detect import detect

ORACLE = json.loads((ROOT / "tests" / "data" / "hta_oracle.json").read_text())["folders"]


@pytest.mark.corpus
@pytest.mark.parametrize("folder", sorted(ORACLE))
def test_hta_compat_matches_hta(folder: str) -> None:
    path = SHARED / folder
    ranks = {r["rank"]: r for r in detect(path, hta_compat=True).ranks.to_dicts()}
    assert sorted(ranks) == sorted(int(r) for r in ORACLE[folder])
    for rank, want in ORACLE[folder].items():
        got = ranks[int(rank)]
        if want["comm_comp_overlap_pct"] is None:
            assert got["comm_comp_overlap_pct"] is None  # no communication kernels
        else:
            assert got["comm_comp_overlap_pct"] == pytest.approx(want["comm_comp_overlap_pct"], abs=0.1)
        for ours, theirs in (("idle_ns", "idle_us"), ("compute_ns", "compute_us"),
                             ("non_compute_ns", "non_compute_us"), ("span_ns", "kernel_time_us")):
            assert got[ours] / 1000 == pytest.approx(want[theirs], rel=0.005), (ours, rank)


@pytest.mark.corpus
def test_toy_kineto_figures_of_the_dataset_readme() -> None:
    """The numbers the h200-ddp README quotes for HTA 0.5.0, through the CLI."""
    ranks = detect(KINETO_TOY, hta_compat=True).ranks.to_dicts()
    assert [r["comm_comp_overlap_pct"] for r in ranks] == pytest.approx([86.56, 85.79], abs=0.1)
    assert [r["idle_ns"] / 1000 for r in ranks] == pytest.approx([10867, 11047], rel=0.005)
    assert [r["compute_ns"] / 1000 for r in ranks] == pytest.approx([638270, 638070], rel=0.005)
    assert [r["non_compute_ns"] / 1000 for r in ranks] == pytest.approx([4577, 4593], rel=0.005)


@pytest.mark.corpus
def test_exact_mode_differs_from_hta_only_by_its_conventions(invoke) -> None:
    exact = json.loads(invoke("detect", KINETO_TOY, "--format", "json").stdout)["ranks"]
    compat = json.loads(invoke("detect", KINETO_TOY, "--format", "json", "--hta-compat").stdout)["ranks"]
    for e, c in zip(exact, compat, strict=True):
        assert e["span_ns"] > c["span_ns"]  # exact mode keeps activity HTA windows out
        assert e["comm_comp_overlap_pct"] > c["comm_comp_overlap_pct"]  # HTA's µs rounding drops overlap
        assert e["cases"] == c["cases"]  # labels do not depend on the breakdown convention
