"""Ranks: one file per rank forms one run; one file with a process per GPU gives ranks in process order."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.paths import DDP_TRACE, H200, NSYS
from traceql.sources.ranks import assign_ranks, rank_from_name


@pytest.mark.corpus
def test_per_rank_files_form_one_run(invoke) -> None:
    r0 = H200 / "nsys-per-rank" / "gpt2_cap25_rank0.sqlite"
    r1 = H200 / "nsys-per-rank" / "gpt2_cap25_rank1.sqlite"
    for args in ([r0, r1], [r1, r0], [r0.parent]):
        info = json.loads(invoke("info", *args, "--format", "json").stdout)
        assert {r["run_id"] for r in info["runs"]} == {"gpt2_cap25"}
        by_path = {Path(r["path"]).name: r["ranks"] for r in info["runs"]}
        assert by_path == {r0.name: [0], r1.name: [1]}
        ranks = {r["rank"]: r for r in info["ranks"]}
        assert sorted(ranks) == [0, 1]
        # rank 0's process has the higher pid here: pid order alone would have swapped them
        assert ranks[0]["pid"] > ranks[1]["pid"]
        assert ranks[0]["devices"] == [0] and ranks[1]["devices"] == [1]
        assert all(r["rank_from"] == "file name" for r in ranks.values())


def test_embedded_run_folder_is_one_run(invoke) -> None:
    info = json.loads(invoke("info", DDP_TRACE, "--format", "json").stdout)
    assert {r["run_id"] for r in info["runs"]} == {"gpt2-nsys"}
    assert [(r["rank"], r["rank_from"], r["devices"]) for r in info["ranks"]] == [
        (0, "file name", [0]), (1, "file name", [1])]


@pytest.mark.corpus
def test_single_file_ddp_ranks_follow_process_order(invoke) -> None:
    single_file_ddp = NSYS / "toy_ddp2_cap25.sqlite"
    info = json.loads(invoke("info", single_file_ddp, "--format", "json").stdout)
    ranks = info["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1]
    assert ranks[0]["pid"] < ranks[1]["pid"]
    assert [r["devices"] for r in ranks] == [[0], [1]]
    con = sqlite3.connect(f"file:{single_file_ddp}?mode=ro", uri=True)
    pids = [r[0] for r in con.execute(
        "SELECT DISTINCT (globalPid >> 24) & 16777215 AS p FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY p")]
    con.close()
    assert [r["pid"] for r in ranks] == pids


def test_rank_rules() -> None:
    a, b = Path("x_rank0.sqlite"), Path("x_rank1.sqlite")
    assert rank_from_name(Path("gpt2_cap25_rank12.sqlite")) == 12
    assert rank_from_name(Path("report.sqlite")) is None
    one = assign_ranks({b: [5], a: [9]})
    assert {(r.path, r.rank, r.run_id) for r in one} == {(a, 0, "x"), (b, 1, "x")}
    # files without rank numbers stay separate runs
    sep = assign_ranks({Path("p.sqlite"): [3], Path("q.sqlite"): [1]})
    assert [(r.run_id, r.rank) for r in sep] == [("p", 0), ("q", 0)]
    # a file with two processes: ranks in pid order, never merged with another file
    multi = assign_ranks({Path("ddp.sqlite"): [7, 8], a: [1]})
    assert [(r.run_id, r.rank, r.pid) for r in multi] == [("ddp", 0, 7), ("ddp", 1, 8), ("x_rank0", 0, 1)]
