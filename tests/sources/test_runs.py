"""Which input files form each run, as the readers group them (the nsys rules and run folders:
``tests/cli/test_parallel.py``): loose Kineto traces are one run, Nsight Compute CSVs go with the first run,
a file no reader groups is a run of its own; loose Kineto traces of different jobs are runs of their own."""

from __future__ import annotations

import gzip
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


def test_loose_kineto_traces_of_two_jobs_are_two_runs() -> None:
    """Rank 0 of GPT-2 on 2 x H200 and rank 1 of GPT-2 on 2 x H100, given together: two jobs (their
    deviceProperties name other GPUs), so two runs, each named in one note (they were one run of ranks 0 and 1,
    whose only hint was a clock note)."""
    import json

    from traceql.commands.ranks import ranks
    from traceql.sources.runs import input_notes

    h200 = sorted((RUNS / "gpt2-torch" / "traces").glob("*.json.gz"))[0]
    h100 = sorted((RUNS / "gpt2-pair-torch" / "traces").glob("*.json.gz"))[1]
    names = {}
    for path in (h200, h100):  # the oracle: each file's own metadata, read whole
        with gzip.open(path) as fh:
            meta = json.load(fh)
        names[path.name] = {d["name"] for d in meta["deviceProperties"]}
    assert names[h200.name] != names[h100.name]
    assert split_runs([h200, h100]) == [[h200], [h100]]
    notes = [n for n in input_notes([h200, h100]) if "jobs given together" in n]
    assert len(notes) == 1 and h200.name in notes[0] and h100.name in notes[0], notes
    got = ranks([h200, h100])
    assert got.steps["run_id"].n_unique() == 2 and any("jobs given together" in n for n in got.notes)
    assert not any("clocks disagree" in n for n in got.notes), got.notes


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
