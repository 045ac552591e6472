"""Which input files form each run, as the readers group them (the nsys rules and run folders:
``tests/cli/test_parallel.py``): loose Kineto traces are one run, Nsight Compute CSVs go with the first run,
a file no reader groups is a run of its own."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.paths import DDP_FILES, DDP_TRACE, ROOT, RUNS
from traceql.sources.runs import split_runs

NCU_FILES = sorted((ROOT / "datasets" / "ncu").glob("*.csv"))
KINETO_FILES = sorted((RUNS / "gpt2-straggler-torch" / "traces").glob("*.json.gz"))


def test_loose_kineto_traces_are_one_run() -> None:
    assert split_runs(KINETO_FILES) == [KINETO_FILES]
    assert split_runs([KINETO_FILES[0], DDP_FILES[0], KINETO_FILES[1], DDP_FILES[1]]) == [KINETO_FILES, DDP_FILES]
    assert split_runs([RUNS / "gpt2-torch", *KINETO_FILES]) == [[RUNS / "gpt2-torch"], KINETO_FILES]


def test_ncu_csvs_go_with_the_first_run() -> None:
    mixed = [NCU_FILES[0], KINETO_FILES[0], DDP_FILES[0], NCU_FILES[1], KINETO_FILES[1], DDP_FILES[1]]
    assert split_runs(mixed) == [[*KINETO_FILES, *NCU_FILES], DDP_FILES]
    assert split_runs([*NCU_FILES, DDP_TRACE]) == [[*NCU_FILES, DDP_TRACE]]  # one run: as given
    assert split_runs(NCU_FILES) == [NCU_FILES]


def test_exports_without_ranks_in_their_names_are_runs_of_their_own(tmp_path: Path) -> None:
    loose = [tmp_path / "a.sqlite", tmp_path / "b.sqlite"]
    for src, dst in zip(DDP_FILES, loose, strict=True):
        shutil.copyfile(src, dst)
    assert split_runs([*loose, DDP_TRACE]) == [[loose[0]], [loose[1]], [DDP_TRACE]]
