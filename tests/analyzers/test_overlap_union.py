"""A compute kernel's overlap is its intersection with the *union* of the communication kernels of its device:
two collectives that ran at once on one device (HTA's public trace has them; no shipped run does) count their
common time once. Checked against the brute-force oracle (``tests.oracle.union_overlap``) on that trace (from
../shared, skipped when absent) and on a frame built here, and bounded by the kernel's duration on shipped runs."""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest

from tests.oracle import overlaps, union_overlap
from tests.paths import DDP_TRACE, INRUN_TRACE, PUBLIC, RUNS, corpus
from traceql.analyzers.overlap import comm_overlap
from traceql.commands.detect import detect
from traceql.labelling.inputs import read_timeline

CONCURRENT = PUBLIC / "hta-kineto" / "negative_queue_length_values_check"  # two NCCL kernels at once, 10 times
COMM_PREFIXES = ("nccl", "rccl", "hccl")


def kineto_kernels(folder: Path) -> list[dict]:
    """The kernels of a folder's Kineto traces from their raw JSON (a file a process): start and end in ns,
    device, whether NCCL's."""
    out = []
    for pid, path in enumerate(sorted(folder.glob("*.json.gz"))):
        for e in json.loads(gzip.decompress(path.read_bytes()), parse_float=Decimal)["traceEvents"]:
            if e.get("cat") == "kernel":
                start = int(Decimal(e["ts"]) * 1000)
                out.append({"start": start, "end": start + int(Decimal(e["dur"]) * 1000), "pid": pid,
                            "device": e["args"]["device"], "comm": e["name"].lower().startswith(COMM_PREFIXES)})
    return out


@pytest.mark.corpus
def test_overlap_with_concurrent_collectives_matches_brute_force() -> None:
    kernels = kineto_kernels(CONCURRENT)
    comm = sorted((k for k in kernels if k["comm"]), key=lambda k: k["start"])
    compute = [k for k in kernels if not k["comm"]]
    # the trace holds what this test is about: collectives that started before the one before them ended, and
    # compute kernels beside such pairs
    spans = [(a["device"], a["start"], max(a["end"], b["end"])) for a, b in zip(comm, comm[1:], strict=False)
             if a["device"] == b["device"] and b["start"] < a["end"]]
    assert len(spans) >= 5
    beside = [k for k in compute if any(d == k["device"] and k["start"] < e and k["end"] > s for d, s, e in spans)]
    assert len(beside) >= 20
    want = overlaps(kernels, compute)
    got = detect(CONCURRENT).kernels
    assert sorted(zip(got["device"], got["start_ns"], got["end_ns"], got["comm_overlap_ns"], strict=True)) == sorted(
        (k["device"], k["start"], k["end"], w) for k, w in zip(compute, want, strict=True))


def _frame(rows: list[tuple[int, str, int, int, str | None]]) -> pl.DataFrame:
    """Kernels of one rank from (device, kind, start, end, collective)."""
    return pl.DataFrame([{"run_id": "r", "rank": 0, "device": d, "start_ns": s, "end_ns": e, "duration_ns": e - s,
                          "kind": kind, "collective": coll} for d, kind, s, e, coll in rows],
                        schema_overrides={"rank": pl.Int32, "device": pl.Int32})


def test_overlap_counts_concurrent_collectives_once() -> None:
    """Device 0: an all-reduce [100, 300) and a broadcast [200, 400) at once, an all-gather [500, 600); device 1:
    an all-reduce [100, 200), which no kernel of device 0 may count."""
    comm = [(0, "comm", 100, 300, "AllReduce"), (0, "comm", 200, 400, "Broadcast"), (0, "comm", 500, 600, "AllGather"),
            (1, "comm", 100, 200, "AllReduce")]
    compute = [(0, "compute", 150, 350, None), (0, "compute", 250, 280, None), (0, "compute", 350, 550, None),
               (0, "compute", 0, 50, None), (0, "compute", 380, 520, None), (1, "compute", 150, 250, None)]
    got = comm_overlap(_frame(comm + compute))
    # worked out by hand: [150, 350) meets the union [100, 400) for 200 ns (each collective alone: 150 + 150)
    assert got["comm_overlap_ns"].to_list() == [200, 30, 100, 0, 40, 50]
    want = [union_overlap(s, e, [(cs, ce) for cd, _, cs, ce, _ in comm if cd == d]) for d, _, s, e, _ in compute]
    assert got["comm_overlap_ns"].to_list() == want
    assert got["comm_overlap_frac"].to_list() == [1.0, 1.0, 0.5, 0.0, 40 / 140, 0.5]
    # the collective that overlapped each the longest (the earlier on a tie)
    assert got["concurrent_comm"].to_list() == ["AllReduce", "AllReduce", "Broadcast", None, "Broadcast",
                                                "AllReduce"]


@pytest.mark.parametrize("path", [
    DDP_TRACE, INRUN_TRACE, RUNS / "gpt2-4rank-nsys", RUNS / "llama-4rank-cap2-nsys", RUNS / "gpt2-torch",
    corpus(CONCURRENT, id="hta-concurrent-collectives"),
], ids=lambda p: getattr(p, "name", None))
def test_overlap_never_exceeds_the_kernel(path: Path) -> None:
    got = comm_overlap(read_timeline(path).kernels)
    assert got.height > 1000 and int((got["comm_overlap_ns"] > 0).sum()) > 100  # overlap to bound
    assert got.filter((pl.col("comm_overlap_ns") < 0) | (pl.col("comm_overlap_ns") > pl.col("duration_ns"))).is_empty()
