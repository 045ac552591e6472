"""`traceql collectives` as a user runs it: the table in 80 columns, JSON, the query relation, public traces."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from tests.oracle import collectives as oracle_collectives
from tests.paths import PUBLIC, RUNS
from traceql.commands.collectives import collectives
from traceql.commands.query import run_query

PAIR = RUNS / "gpt2-pair-nsys"


def test_table_fits_80_columns_and_names_sizes_bandwidth_and_the_link(invoke, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    result = invoke("collectives", PAIR, "--steps")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "NVLink 4, 450 GB/s a way" in result.stdout and "NCCL NVTX payload" in result.stdout
    rows = [line for line in lines if "AllReduce RING/LL" in line and line[:3].strip().isdigit()]
    assert len(rows) == 13 and sum("27.0 MiB" in r for r in rows) == 12 and "148.7 MiB" in rows[-1]
    steps = lines[lines.index("Steps of gpt2-pair-nsys") + 3:]
    assert [r.split()[-1] for r in steps] == ["0"] * 5  # rank 0 came last at each step (JSON: the same)
    assert "Steps of" not in invoke("collectives", PAIR).stdout


def test_json_holds_positions_steps_and_instances(invoke) -> None:
    result = invoke("collectives", PAIR, "--format", "json")
    data = json.loads(result.stdout)
    assert len(data["positions"]) == 13 and len(data["instances"]) == 65 and len(data["steps"]) == 5
    assert {i["bytes"] for i in data["instances"]} == {28351488, 155968512}
    assert all(0 < i["busbw_gbps"] < i["link_peak_gbps"] for i in data["instances"])


def test_query_reads_the_collectives_relation() -> None:
    got = run_query([PAIR], "SELECT count(*) AS n, count(DISTINCT rank) AS ranks, min(bytes) AS least "
                            "FROM collectives WHERE op = 'AllReduce'")
    assert got.row(0) == (130, 2, 28351488)  # 65 instances, each on both ranks
    per_rank = run_query([PAIR], "SELECT rank, sum(CASE WHEN last THEN 1 ELSE 0 END) AS last FROM collectives "
                                 "GROUP BY rank ORDER BY rank")
    assert per_rank["last"].sum() == 65


def test_a_trace_without_sizes_says_so(invoke) -> None:
    result = invoke("collectives", RUNS / "gpt2-4rank-nsys" / "traces" / "gpt2-4rank-nsys_rank0.sqlite")
    assert result.exit_code == 0 and result.stderr == ""
    assert "carry no size" in " ".join(result.stdout.split())


def test_a_missing_file_is_one_line_and_exit_2(invoke, tmp_path: Path) -> None:
    result = invoke("collectives", tmp_path / "nope.sqlite")
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1


PUBLIC_TRACES = ["hta-kineto/nccl_parser_config/nccl_data.json.gz", "hta-kineto/trace_filter",
                 "hta-kineto/negative_queue_length_values_check/rank0.json.gz", "hta-kineto/trace_diff/control",
                 "hta-kineto/trace_diff/test", "hta-kineto/df_index_resolver/df_index_resolver.json.gz",
                 "hta-kineto/critical_path/alexnet", "hta-kineto/ns_resolution_trace",
                 "nsysai-h100/h100_2gpu_1s.sqlite", "nsysai-h100/mfu_2gpu_after.sqlite",
                 "nsysai-h100/mfu_2gpu_before.sqlite", "nvfuser-h100/report1.sqlite",
                 "pipit-perlmutter/saxpy-mpi-cuda_nsys_perlmutter0.sqlite", "tracelens-mi300/train_resnet18.json.gz"]


@pytest.mark.corpus
@pytest.mark.parametrize("name", PUBLIC_TRACES)
def test_every_public_trace_reads_and_says_when_it_carries_no_size(name: str) -> None:
    result = collectives(PUBLIC / name)
    inst = result.instances
    unsized = inst.filter(inst["bytes"].is_null()).height
    assert (unsized > 0) == any("carry no size" in n for n in result.notes)
    sized = inst.filter(inst["bytes"].is_not_null() & inst["busbw_gbps"].is_not_null())
    assert (sized["busbw_gbps"] > 0).all()


@pytest.mark.corpus
def test_hta_nccl_trace_sizes_are_its_kernels_own_records() -> None:
    inst = collectives(PUBLIC / "hta-kineto" / "nccl_parser_config" / "nccl_data.json.gz").instances
    assert set(inst["size_from"].drop_nulls()) == {"torch.profiler (kernel)"}
    assert inst["bytes"].min() > 0 and inst.height == 21


@pytest.mark.corpus
def test_ranks_whose_clocks_disagree_have_no_last_rank_and_a_floor_of_bandwidth() -> None:
    result = collectives(PUBLIC / "hta-kineto" / "trace_filter")  # two ranks of a 128-rank job, 21 ms apart
    inst = result.instances
    assert inst.height == 10 and inst["last_rank"].null_count() == 10 and inst["skew_ns"].null_count() == 10
    assert any("clocks disagree" in n and "a floor" in n for n in result.notes)
    rows = result.rows  # the transfer is the shortest of the ranks' kernels
    least = rows.group_by("step", "collective", "instance").agg(pl.col("duration_ns").min().alias("least"))
    both = inst.join(least, on=["step", "collective", "instance"])
    assert (both["transfer_ns"] == both["least"]).all()


GPT2_GRADIENTS = Path(__file__).resolve().parents[2] / "datasets" / "examples" / "gpt2" / "gradients.json"


def test_gradients_size_a_run_that_records_none(invoke, tmp_path: Path) -> None:
    """The embedded run records no size; DDP's packing of the example's gradients at its manifest's cap (25 MB) is
    the buckets DDP itself logged on another run of the model (gpt2-pair-torch's rank results)."""
    bare = collectives().instances
    assert bare["bytes"].null_count() == bare.height
    sized = collectives(gradients=GPT2_GRADIENTS).instances
    logged = json.loads((RUNS / "gpt2-pair-torch" / "results" / "rank0.json").read_text())["ddp_buckets"]
    for _, step in sized.group_by("step"):
        assert step.sort("instance")["bytes"].to_list() == logged
    assert set(sized["size_from"]) == {"DDP buckets"} and (sized["busbw_gbps"] > 0).all()
    loose = tmp_path / "rank0.sqlite"  # outside its run folder: no manifest, so no cap
    shutil.copyfile(RUNS / "gpt2-4rank-nsys" / "traces" / "gpt2-4rank-nsys_rank0.sqlite", loose)
    result = invoke("collectives", loose, "--gradients", GPT2_GRADIENTS)
    assert result.exit_code == 0 and 'add "bucket_cap_mb" to the gradients file' in " ".join(result.stdout.split())
    capped = tmp_path / "g.json"
    capped.write_text(json.dumps({**json.loads(GPT2_GRADIENTS.read_text()), "bucket_cap_mb": 2}))
    result = invoke("collectives", RUNS / "gpt2-pair-torch" / "traces" / "gpt2-pair-torch_rank0.json.gz",
                    "--gradients", capped)  # its records win; no note of a mismatch
    assert result.exit_code == 0 and "do not match" not in result.stdout


@pytest.mark.parametrize("run", ["fsdp2-pair-nsys", "gpt2-4rank-nsys"])
def test_per_collective_totals_match_sqlite(invoke, run: str) -> None:
    """Per collective (what `nsys recipe nccl_sum` gives): its kernels over every rank, their total time and its
    share of all the run's kernel time, a kernel's mean, least, most and std-dev. The oracle: each export's
    NCCL kernels by sqlite3 (``tests.oracle.collectives``: count and total per collective), every kernel's time,
    and each collective's durations for the spread."""
    import numpy as np

    from tests.oracle import exports, nccl_collective, rows

    path = RUNS / run
    want = oracle_collectives(path)
    every = sum(rows(f, "SELECT sum(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0][0] for f in exports(path))
    durations: dict[str, list[int]] = {}
    for f in exports(path):
        for name, ns in rows(f, "SELECT s.value, k.end - k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                                "JOIN StringIds s ON s.id = k.shortName WHERE s.value LIKE 'nccl%'"):
            durations.setdefault(nccl_collective(name), []).append(ns)
    got = json.loads(invoke("collectives", path, "--format", "json").stdout)["totals"]
    assert {t["collective"]: (t["kernels"], t["total_ns"]) for t in got} == want
    for t in got:
        d = np.array(durations[t["collective"]])
        assert t["gpu_share"] == pytest.approx(d.sum() / every)
        assert (t["min_ns"], t["max_ns"]) == (d.min(), d.max())
        assert t["mean_ns"] == pytest.approx(d.mean()) and t["std_ns"] == pytest.approx(d.std())
    assert [t["total_ns"] for t in got] == sorted((t["total_ns"] for t in got), reverse=True)
    table = invoke("collectives", path).stdout
    assert f"{got[0]['total_ns'] / 1e6:,.3f}" in table and "GPU %" in table


def test_top_keeps_the_longest_instances_in_their_order(invoke) -> None:
    """--top 3 on the embedded example: the three instances of a step whose median transfer took longest (the
    JSON's positions), in their order, and a line saying how many were left out."""
    positions = json.loads(invoke("collectives", "--format", "json").stdout)["positions"]
    longest = sorted(sorted(positions, key=lambda p: -p["transfer_ns"])[:3], key=lambda p: p["instance"])
    text = invoke("collectives", "--top", "3").stdout
    shown = [int(line.split()[0]) for line in text.splitlines() if line[:3].strip().isdigit()]
    assert shown == [p["instance"] for p in longest]
    assert f"the 3 of {len(positions)} that took longest (--top 3; --top 0: all)" in " ".join(text.split())


@pytest.mark.parametrize("run", [RUNS / "gpt2-4rank-straggler-nsys", RUNS / "gpt2-pair-torch", PAIR],
                         ids=lambda p: p.name)
def test_a_large_run_read_a_shard_at_a_time_gives_the_same_collectives(run: Path, monkeypatch) -> None:
    """A run over ``shards.LARGE_BYTES`` is read a rank at a time (one rank's kernels in memory at once, or two
    small ones on threads: ``shards.at_once``); its relation, totals and notes are those of the run read whole."""
    from traceql.comms import relation
    from traceql.sources import shards

    read: list[int] = []
    real = relation.read_shards
    monkeypatch.setattr(relation, "read_shards", lambda parts: read.append(len(parts)) or real(parts))
    whole = collectives(run).to_dict()
    assert read == []
    monkeypatch.setattr(shards, "LARGE_BYTES", -1)
    split = collectives(run).to_dict()
    assert read == [len(shards.shards(run) or [])] and read[0] >= 2
    assert split == whole and whole["instances"]
