"""The run folders `profile buckets` reads: manifests and results that cannot be, runs that do not go
together, an output inside a run."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.bad_inputs.scenario import Scenario, case, named
from tests.paths import RUNS

NO_TRACE_RUN = RUNS / "gpt2-b16-cap2-none"  # a small run folder: manifest, results and logs, no trace


def run_copy(tmp: Path, change: Callable[[dict[str, Any]], None] | None = None, name: str = "run") -> Path:
    run = tmp / name
    shutil.copytree(NO_TRACE_RUN, run)
    if change is not None:
        data = json.loads((run / "manifest.json").read_text())
        change(data)
        (run / "manifest.json").write_text(json.dumps(data))
    return run


def run_files(run: Path) -> list[Path]:
    return sorted(p for p in run.rglob("*") if p.is_file())


def buckets(run: Path, phrase: str, names: Path | None, out: Path | None = None, *more: Path) -> Scenario:
    out = out or run.parent / "profiles"
    return Scenario(["profile", "buckets", run, *more, "--out", out], 2, phrase, names,
                    run_files(run) + [f for m in more for f in run_files(m)], [out])


@case("profile")
def buckets_out_inside_the_run(tmp: Path) -> Scenario:
    run = run_copy(tmp)
    return buckets(run, "lies inside the input", None, run / "profiles")


MANIFESTS: list[tuple[str, Callable[[dict[str, Any]], Any], str]] = [
    ("manifest_without_cap_size", lambda m: m["input"]["local_config"].pop("cap_size"),
     "no input.local_config.cap_size"),
    ("manifest_cap_size_nan", lambda m: m["input"]["local_config"].update(cap_size=float("nan")),
     "input.local_config.cap_size must be a finite number above 0, got NaN"),
    ("manifest_world_size_a_string", lambda m: m["input"]["local_config"].update(world_size="2"),
     'input.local_config.world_size must be an integer of at least 1, got "2"'),
    ("manifest_batchsize_missing", lambda m: m["input"]["local_config"].pop("batchsize"),
     "no input.local_config.batchsize"),
    ("manifest_without_input_path", lambda m: m["input"].pop("path"), "no input.path"),
    ("manifest_local_config_a_list", lambda m: m["input"].update(local_config=[]),
     "input.local_config must be an object"),
]


def _bad_manifest(tmp: Path, change: Callable[[dict[str, Any]], Any], phrase: str) -> Scenario:
    run = run_copy(tmp, change)
    return buckets(run, phrase, run / "manifest.json")


for _name, _change, _phrase in MANIFESTS:
    named("profile", f"buckets_{_name}", lambda tmp, c=_change, p=_phrase: _bad_manifest(tmp, c, p))


@case("profile")
def buckets_manifest_a_list(tmp: Path) -> Scenario:
    run = run_copy(tmp)
    (run / "manifest.json").write_text("[]")
    return buckets(run, "not the manifest of a run", run / "manifest.json")


@case("profile")
def buckets_results_with_string_buckets(tmp: Path) -> Scenario:
    run = run_copy(tmp)
    path = run / "results" / "rank0.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "ddp_buckets": ["9446400"]}))
    return buckets(run, "ddp_buckets must be a list of byte counts", path)


@case("profile")
def buckets_runs_of_two_world_sizes(tmp: Path) -> Scenario:
    first = run_copy(tmp)
    other = run_copy(tmp, lambda m: m["input"]["local_config"].update(world_size=4), name="run4")
    return buckets(first, "of one model and world size", other, None, other)


def _result_rank(tmp: Path, rank: Any, phrase: str) -> Scenario:
    """Rank 1's result of the shipped run naming ``rank`` instead."""
    run = run_copy(tmp)
    path = run / "results" / "rank1.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "rank": rank}))
    return buckets(run, phrase, path)


for _name, _rank, _phrase in [("a_word", "one", 'got "one"'), ("past_the_world", 2, "got 2"),
                              ("negative", -1, "got -1"), ("fractional", 0.5, "got 0.5")]:
    named("profile", f"buckets_results_rank_{_name}", lambda tmp, r=_rank, p=_phrase: _result_rank(
        tmp, r, "rank must be a rank of the run, an integer from 0 to 1 (world_size 2), " + p))
