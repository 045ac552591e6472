"""Collectives on real runs: sizes against what DDP recorded, one workload under two profilers, bus bandwidth
against nccl-tests' formula computed from the exports alone, and the last rank against `ranks`."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import polars as pl
import pytest

from tests.comms.oracle_busbw import busbw
from tests.paths import RUNS
from traceql.commands.collectives import collectives
from traceql.commands.ranks import ranks
from traceql.validation.matrix import load_matrix

PAIR_NSYS, PAIR_TORCH, PAIR_SERIAL = RUNS / "gpt2-pair-nsys", RUNS / "gpt2-pair-torch", RUNS / "gpt2-pair-serial-nsys"
STRAGGLERS = [RUNS / r for r in ("gpt2-straggler-nsys", "gpt2-4rank-straggler-nsys", "llama-4rank-straggler-nsys",
                                 "gpt2-straggler-torch", "block-tp-straggler-nsys", "gpt2-fsdp2-straggler-nsys")]


def buckets(run: Path) -> list[int]:
    return json.loads((run / "results" / "rank0.json").read_text())["ddp_buckets"]


@pytest.mark.parametrize(("run", "source"), [(PAIR_TORCH, "torch.profiler (kernel)"),
                                             (PAIR_NSYS, "NCCL NVTX payload"), (PAIR_SERIAL, "NCCL NVTX payload"),
                                             (RUNS / "gpt2-4rank-cap2-nsys", "DDP buckets")])
def test_each_steps_allreduces_carry_the_buckets_ddp_recorded(run: Path, source: str) -> None:
    inst = collectives(run).instances.filter(pl.col("op") == "AllReduce")
    assert set(inst["size_from"]) == {source}
    for _, step in inst.group_by("step"):  # the trace's own record (or the buckets) against DDP's logging data
        assert step.sort("instance")["bytes"].to_list() == buckets(run)


def test_kineto_and_nsys_collections_of_one_workload_agree() -> None:
    nsys, torch = (collectives(r) for r in (PAIR_NSYS, PAIR_TORCH))
    for result in (nsys, torch):
        assert result.instances.group_by("step").len()["len"].to_list() == [13] * result.steps.height
    both = nsys.positions.join(torch.positions, on=["collective", "instance"], suffix="_k")
    assert both.height == 13
    assert both["bytes"].to_list() == both["bytes_k"].to_list()
    gap = (both["busbw_gbps_k"] / both["busbw_gbps"] - 1).abs()
    assert gap.max() < 0.06  # two runs of one workload: measured 0.1-4.4 %
    whole = [r.instances["busbw_gbps"].median() for r in (nsys, torch)]
    assert abs(whole[1] / whole[0] - 1) < 0.03
    assert nsys.runs[0]["link"] == torch.runs[0]["link"] == "NVLink 4"


def serialized() -> list:
    return [r for r in load_matrix().runs if "serial" in r.label and not r.light]


def test_bus_bandwidth_of_every_serialized_run_is_nccl_tests_and_below_the_link_peak() -> None:
    runs = serialized()
    assert len(runs) == 42
    for run in runs:
        folder = run.path()
        inst = collectives(folder).instances.filter(pl.col("op") == "AllReduce")
        oracle = busbw(sorted((folder / "traces").glob("*.sqlite")), run.results()[0]["ddp_buckets"])
        assert inst.height == len(oracle), run.label
        assert inst["bytes"].null_count() == 0, run.label
        ours, theirs = inst["busbw_gbps"].median(), statistics.median(oracle)
        assert abs(ours / theirs - 1) < 0.10, (run.label, ours, theirs)  # measured: at most 2.1 %
        assert (inst["busbw_gbps"] < inst["link_peak_gbps"]).all(), run.label  # H100 NVLink 4: 450 GB/s


def straggler_runs() -> list[Path]:
    matrix = [r.path() for r in load_matrix().runs
              if ("straggler" in r.label or "delay" in r.label) and not r.light]
    return STRAGGLERS + matrix


def test_the_last_rank_of_each_step_is_the_straggler_ranks_names() -> None:
    runs = straggler_runs()
    assert len(runs) == 16
    for run in runs:
        named = ranks(run).stragglers.select("step", pl.col("rank").alias("straggler"))
        last = collectives(run).steps.select("step", "last_rank")
        both = named.join(last, on="step", how="left")
        assert both.height >= 1, run
        assert both["straggler"].to_list() == both["last_rank"].to_list(), run
        config = json.loads((run / "manifest.json").read_text())["input"]["local_config"]
        injected = (config.get("straggler") or config.get("gpu_delay"))["rank"]
        assert both["last_rank"].to_list().count(injected) >= 1, run


def test_a_trace_of_one_rank_has_no_last_rank_and_a_floor_of_bandwidth() -> None:
    one = RUNS / "gpt2-pair-torch" / "traces" / "gpt2-pair-torch_rank0.json.gz"
    result = collectives(one)
    inst = result.instances
    assert inst.height == 39 and inst["last_rank"].null_count() == 39 and inst["skew_ns"].null_count() == 39
    assert any("part of a larger job" in n for n in result.notes)
    whole = collectives(PAIR_TORCH).instances
    # the shortest kernel of the one rank held is at least the transfer: its bandwidth is at most the whole run's
    assert inst["busbw_gbps"].median() <= whole["busbw_gbps"].median() * 1.001


def _stripped(tmp: Path, drop_calls: bool) -> Path:
    """A copy of the torch.profiler pair whose NCCL kernels lost their size arguments (as before torch 2.2), and
    with ``drop_calls`` its ``record_param_comms`` / ``nccl:*`` records too."""
    import gzip
    import shutil

    run = Path(shutil.copytree(PAIR_TORCH, tmp / "pair"))
    for trace in (run / "traces").glob("*.json.gz"):
        doc = json.loads(gzip.decompress(trace.read_bytes()))
        kept = []
        for ev in doc["traceEvents"]:
            name = str(ev.get("name", ""))
            if drop_calls and (name == "record_param_comms" or name.startswith("nccl:")):
                continue
            if ev.get("cat") == "kernel" and "nccl" in name:
                for key in ("In msg nelems", "Out msg nelems", "dtype", "Group size", "Collective name"):
                    ev.get("args", {}).pop(key, None)
            kept.append(ev)
        doc["traceEvents"] = kept
        trace.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return run


@pytest.mark.parametrize(("drop_calls", "source"), [(False, "torch.profiler (call)"),
                                                    (True, "DDP buckets")])
def test_sizes_fall_back_to_the_launching_call_then_to_the_buckets(tmp_path: Path, drop_calls: bool,
                                                                   source: str) -> None:
    inst = collectives(_stripped(tmp_path, drop_calls)).instances.filter(pl.col("op") == "AllReduce")
    assert set(inst["size_from"]) == {source}
    for _, step in inst.group_by("step"):
        assert step.sort("instance")["bytes"].to_list() == buckets(PAIR_TORCH)


def test_fsdp_all_gathers_and_reduce_scatters_agree_under_both_profilers() -> None:
    """NCCL's payload gives what one rank sends, torch.profiler the whole buffer: both are nccl-tests' size once
    read; each step reduce-scatters every gradient (FSDP pads each to a multiple of the ranks)."""
    nsys, torch = (collectives(RUNS / r) for r in ("fsdp2-pair-nsys", "fsdp2-pair-torch"))
    both = nsys.positions.join(torch.positions, on=["collective", "instance"], suffix="_k")
    assert both.height == 38 and set(both["op"]) == {"AllGather", "ReduceScatter"}
    assert both["bytes"].to_list() == both["bytes_k"].to_list()
    grads = sum(json.loads((RUNS / "fsdp2-pair-nsys" / "results" / "rank0.json").read_text())["param_bytes"])
    for result in (nsys, torch):
        scattered = (result.instances.filter(pl.col("op") == "ReduceScatter").group_by("step")
                     .agg(pl.col("bytes").sum())["bytes"])
        assert all(0 <= b - grads < 4 * 1024 for b in scattered)
        by_op = {op: bw for op, bw in result.instances.group_by("op").agg(pl.col("busbw_gbps").median()).iter_rows()}
        assert 100 < by_op["AllGather"] < 450 and 100 < by_op["ReduceScatter"] < 450
    medians = [r.instances.group_by("op").agg(pl.col("busbw_gbps").median()).sort("op")["busbw_gbps"]
               for r in (nsys, torch)]
    assert ((medians[1] / medians[0] - 1).abs() < 0.05).all()  # measured: 0.1 and 0.5 %


def test_the_link_collect_recorded_is_the_peak(tmp_path: Path) -> None:
    import shutil

    run = Path(shutil.copytree(PAIR_NSYS, tmp_path / "pair"))
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["environment"]["interconnect"] = {"nvlink_links": 18, "nvlink_link_gbps": 26.562,
                                               "nvlink_gbps": 478.116, "from": "nvidia-smi nvlink -s"}
    (run / "manifest.json").write_text(json.dumps(manifest))
    result = collectives(run)
    assert result.runs[0]["link"] == "NVLink, 18 x 26.562 GB/s (nvidia-smi)"
    inst = result.instances
    assert (inst["link_peak_gbps"] == 478.116).all()
    assert ((inst["peak_share"] - inst["busbw_gbps"] / 478.116).abs() < 1e-12).all()
    assert collectives(PAIR_NSYS).runs[0]["link"] == "NVLink 4"  # recorded nothing: from the GPU's name


@pytest.mark.parametrize(("run", "ops"), [(RUNS / "fsdp2-pair-torch", {"AllGather": 0.5, "ReduceScatter": 0.5}),
                                          (RUNS / "gpt2-torch", {"AllReduce": 1.0})])
def test_bus_bandwidth_is_nccl_tests_factor_of_the_algorithm_bandwidth(run: Path, ops: dict[str, float]) -> None:
    """nccl-tests' definitions (PERFORMANCE.md): busbw = algbw x (n-1)/n for an all-gather or a reduce-scatter,
    x 2(n-1)/n for an all-reduce; on 2 ranks 0.5 and 1.0. The ranks are the processes whose trace files the run
    holds (one a rank), counted from the folder; every sized instance is checked."""
    files = sorted((run / "traces").glob("*.json*"))
    n = len(files)
    inst = collectives(run).instances.filter(pl.col("busbw_gbps").is_not_null())
    assert n == 2 and set(inst["op"]) == set(ops) and set(inst["ranks"]) == {n}
    for op, factor in ops.items():
        mine = inst.filter(pl.col("op") == op)
        assert mine.height >= 30 and factor == {"AllReduce": 2 * (n - 1) / n}.get(op, (n - 1) / n)
        assert ((mine["busbw_gbps"] / mine["algbw_gbps"] - factor).abs() < 1e-9).all(), op


def test_one_ranks_export_has_no_communicator_size_nor_bandwidth() -> None:
    """Rank 1's export of the 2-rank pair alone (its file name says rank 1: a job of 2 ranks at least): its
    all-reduces carry their sizes (NCCL's NVTX payloads) but not how many ranks they spanned, so neither that
    nor a bus bandwidth is given (with the part-of-a-job and the clock checks swapped it was 1 rank, 0.0 GB/s)."""
    export = PAIR_NSYS / "traces" / "gpt2-pair-nsys_rank1.sqlite"
    result = collectives(export)
    inst = result.instances
    assert inst.height == 65 and inst["bytes"].is_not_null().all()
    assert inst["ranks"].is_null().all() and inst["busbw_gbps"].is_null().all() and set(inst["present"]) == {1}
    assert any("part of a larger job (rank 1 alone" in n for n in result.notes), result.notes


def test_ranks_0_and_2_of_four_are_part_of_a_job(tmp_path: Path) -> None:
    """Ranks 0 and 2 of the 4-rank GPT-2 run, read without 1 and 3 (rank numbers from the file names): two
    ranks whose highest number is 2, so the job had at least 3 and the pair is part of it."""
    from traceql.commands.ranks import ranks as ranks_of

    run = RUNS / "gpt2-4rank-nsys"
    two = [run / "traces" / f"gpt2-4rank-nsys_rank{r}.sqlite" for r in (0, 2)]
    assert all(p.is_file() for p in two)
    notes = ranks_of(two).notes
    assert any("part of a larger job (ranks 0, 2 alone" in n for n in notes), notes
