"""Labels you can trust: physically possible cases, the clock's tick, replicas, and each label's reference kind.

The public HTA traces (whole-microsecond Kineto clocks, a sharded-embedding job) come from ../shared and
skip when it is absent; the rest runs on the embedded data.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from tests.paths import SHARED
from traceql.analyzers.baselines.physical import TICKS, clock_ticks
from traceql.analyzers.baselines.replicas import replica_groups
from traceql.analyzers.detection.detector import SlowdownDetector
from traceql.commands.detect import detect
from traceql.labelling.inputs import read_timeline

ROOT = Path(__file__).resolve().parents[2]
EMBEDDED = ROOT / "datasets/default/gpt2-nsys"
PUBLIC = SHARED / "public/hta-kineto"
CORPUS = SHARED / "h200-ddp/nsys"
HTA = ["trace_filter", "trace_diff/control", "trace_diff/test", "negative_queue_length_values_check",
       "nccl_parser_config"]
DETECTOR_KINDS = {"clean", "borrowed", "corrected", "contaminated", "none"}
needs_public = pytest.mark.skipif(not PUBLIC.exists(), reason="../shared/datasets/public is absent")


def _excess(cases: pl.DataFrame) -> pl.Series:
    return cases["duration_ns"] - cases["baseline_ns"]


@needs_public
@pytest.mark.parametrize("name", HTA)
def test_public_hta_cases_are_physically_possible(name: str) -> None:
    kernels = detect(PUBLIC / name).kernels
    ticks = clock_ticks(read_timeline(PUBLIC / name).kernels)
    cases = kernels.filter("is_slowdown").join(ticks, on="run_id")
    assert cases.height > 0  # the traces overlap compute with communication: there is something to judge
    assert int((_excess(cases) > cases["comm_overlap_ns"]).sum()) == 0
    assert int((_excess(cases) <= TICKS * cases["tick_ns"]).sum()) == 0
    assert set(kernels["reference_kind"].unique()) <= DETECTOR_KINDS


@needs_public
def test_whole_microsecond_clocks_are_read_from_the_data() -> None:
    for name in HTA[:4]:  # Kineto traces with integer microsecond timestamps
        assert clock_ticks(read_timeline(PUBLIC / name).kernels)["tick_ns"].to_list() == [1000]
    # nccl_parser_config writes nanoseconds ("ts": 4458676522690.655): no coarse tick
    assert clock_ticks(read_timeline(PUBLIC / "nccl_parser_config").kernels)["tick_ns"].to_list() == [1]
    # whole-microsecond cases are gone: before the tick, 196 cases of these traces had an excess under 2 µs
    cases = detect(PUBLIC / "trace_diff/test").kernels.filter("is_slowdown")
    assert int((_excess(cases) < 2000).sum()) == 0


@needs_public
def test_a_shard_borrows_no_reference_from_another() -> None:
    """trace_filter: rank 1's embedding backward (28.8 ms in both steps) is another shard's work than rank 0's
    (11.7 ms): the ranks are not replicas, and the kernel is no case."""
    timeline = read_timeline(PUBLIC / "trace_filter")
    compute = timeline.kernels.filter(pl.col("kind") == "compute")
    assert replica_groups(compute)["replica"].to_list() == [0, 1]
    kernels = detect(PUBLIC / "trace_filter").kernels
    embedding = kernels.filter((pl.col("rank") == 1)
                               & pl.col("name").cast(pl.String).str.contains("split_embedding_backward"))
    assert embedding.height >= 2 and not embedding["is_slowdown"].any()
    rank1 = detect(PUBLIC / "trace_filter/sampled_rank-1.json.gz")
    both = detect(PUBLIC / "trace_filter")
    lost = both.ranks.filter(pl.col("rank") == 1)["time_lost_ns"][0]
    assert lost < 3_000_000 and lost == pytest.approx(rank1.time_lost_ns(), rel=0.5)  # was 40.6 ms with rank 0


def test_ddp_ranks_are_replicas() -> None:
    compute = read_timeline(ROOT / "datasets/runs/gpt2-4rank-nsys").kernels.filter(pl.col("kind") == "compute")
    groups = replica_groups(compute)
    assert groups["rank"].to_list() == [0, 1, 2, 3] and groups["replica"].to_list() == [0, 0, 0, 0]


def test_nsys_clocks_have_no_coarse_tick() -> None:
    assert clock_ticks(read_timeline(None).kernels)["tick_ns"].to_list() == [1]


@pytest.mark.parametrize("single_trace", [False, True])
def test_embedded_cases_never_lose_more_than_they_overlapped(single_trace: bool) -> None:
    baseline = None if single_trace else [ROOT / "datasets/default/gpt2-single-nsys"]
    kernels = detect(EMBEDDED, baseline=baseline, single_trace=single_trace).kernels
    cases = kernels.filter("is_slowdown")
    assert cases.height > 300
    assert int((_excess(cases) > cases["comm_overlap_ns"]).sum()) == 0
    overlapped = kernels.filter((pl.col("comm_overlap_ns") > 0) & pl.col("baseline_ns").is_not_null())
    assert int((_excess(overlapped) > overlapped["comm_overlap_ns"]).sum()) == 0  # the floor holds for all


def test_every_label_says_how_good_its_reference_is() -> None:
    paired = detect(EMBEDDED, baseline=[ROOT / "datasets/default/gpt2-single-nsys"])
    kinds = paired.reference_kinds()
    assert set(kinds) == {"twin", "none"} and kinds["none"]["cases"] == 0
    assert kinds["twin"]["cases"] == paired.cases()
    single = detect(EMBEDDED, single_trace=True)
    kinds = single.reference_kinds()
    assert {"clean", "borrowed", "contaminated", "none"} <= set(kinds) <= DETECTOR_KINDS
    assert sum(k["kernels"] for k in kinds.values()) == single.kernels.height
    assert kinds["none"]["cases"] == 0
    assert single.to_dict()["reference_kinds"] == kinds
    # the in-run reference is a twin too; the isolated steps' own kernels judge nothing
    inrun = detect(ROOT / "datasets/inrun/gpt2-inrun-nsys").kernels
    own = inrun.filter(pl.col("baseline_kind") == "reference")
    assert own.height > 0 and set(own["reference_kind"].unique()) == {"none"}


def test_clean_references_are_precise_on_the_embedded_pair() -> None:
    truth = detect(EMBEDDED, baseline=[ROOT / "datasets/default/gpt2-single-nsys"]).kernels
    single = detect(EMBEDDED, single_trace=True).kernels
    clean = single["reference_kind"] == "clean"
    labelled = single["is_slowdown"] & clean
    assert int(labelled.sum()) >= 20
    assert float((labelled & truth["is_slowdown"]).sum() / labelled.sum()) >= 0.95


def test_the_margin_keeps_near_threshold_kernels_undecided() -> None:
    """A kernel within the estimate's own error of the threshold is not a case on a clean reference."""
    wide = detect(EMBEDDED, single_trace=True, detector=SlowdownDetector(margin=0.05)).kernels
    narrow = detect(EMBEDDED, single_trace=True, detector=SlowdownDetector(margin=0.0)).kernels
    clean = narrow["reference_kind"] == "clean"
    assert int((wide["is_slowdown"] & clean).sum()) < int((narrow["is_slowdown"] & clean).sum())
    with pytest.raises(ValueError, match="margin"):
        SlowdownDetector(margin=0.7).fit([[0.0] * 7])


@pytest.mark.skipif(not CORPUS.exists(), reason="../shared/datasets/h200-ddp is absent")
def test_a_correction_stays_within_the_physical_bounds() -> None:
    """gpt2 cap2 has positions whose every instance overlapped, with partly overlapped ones: corrected, each
    estimate between the longest ``duration − overlap`` and the shortest instance of its position."""
    kernels = detect(CORPUS / "gpt2_ddp2_cap2.sqlite", single_trace=True).kernels
    fixed = kernels.filter(pl.col("reference_kind") == "corrected")
    assert fixed.height > 0
    bounds = fixed.group_by("run_id", "signature", "baseline_ns").agg(  # one estimate per position
        pl.col("duration_ns").min().alias("hi"), (pl.col("duration_ns") - pl.col("comm_overlap_ns")).max().alias("lo"))
    assert bool(((bounds["lo"] <= bounds["baseline_ns"]) & (bounds["baseline_ns"] <= bounds["hi"])).all())
