"""Profiles, clusters and `profile`'s folders: numbers that cannot be, files that are not files, outputs
that are files (the run folders `profile buckets` reads: ``cases_buckets``)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.bad_inputs.scenario import Scenario, case, named
from tests.paths import ROOT, TINY

PROFILES = ROOT / "datasets" / "examples" / "profiles" / "gpt2"
CLUSTER = ROOT / "datasets" / "examples" / "clusters" / "h200-h100.json"
COMPUTE, MEMORY, BUCKETS = "compute-nvidia-h200.json", "memory-nvidia-h200.json", "buckets-nvidia-h200.json"


def profiles(tmp: Path, name: str | None = None, change: Callable[[dict[str, Any]], Any] | None = None, *,
             text: str | None = None) -> Path:
    """A copy of the GPT-2 profile folder with ``name`` passed through ``change`` (its result written as JSON,
    NaN and Infinity as Python's json writes them) or replaced by ``text``."""
    folder = tmp / "profiles"
    shutil.copytree(PROFILES, folder)
    if name is not None:
        path = folder / name
        data = change(json.loads(path.read_text())) if change else None
        path.write_text(text if text is not None else json.dumps(data))
    return folder


def solve(folder: Path, phrase: str, names: Path | None, *, cluster: Path = CLUSTER) -> Scenario:
    """`solve` on ``folder``: refused with exit 2, naming ``names``; every file of it left as it was."""
    inputs = sorted(p for p in folder.iterdir() if p.is_file() and not p.is_symlink()) + [cluster]
    return Scenario(["solve", folder, "-n", 64, "-c", cluster], 2, phrase, names, inputs)


def damaged(tmp: Path, name: str, change: Callable[[dict[str, Any]], None], phrase: str) -> Scenario:
    """`solve` on the profiles with one field of ``name`` changed in place by ``change``."""
    def edit(data: dict[str, Any]) -> dict[str, Any]:
        change(data)
        return data

    folder = profiles(tmp, name, edit)
    return solve(folder, phrase, folder / name)


def row(key: str, value: Any, i: int = 2) -> Callable[[dict[str, Any]], None]:
    """Set ``key`` of entry ``i`` (of ``batches`` or ``caps``)."""
    def change(data: dict[str, Any]) -> None:
        data["caps" if data["kind"] == "buckets" else "batches"][i][key] = value
    return change


# --- numbers a profile cannot hold: (case, file, change, phrase) -------------------------------------------------

def _extend(data: dict[str, Any]) -> None:
    data["batches"].append(dict(data["batches"][0]))


def _zero_step(data: dict[str, Any]) -> None:
    data["batches"][1].update(forward_ms=0, backward_ms=0.0, optimizer_ms=0)


def _every(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """Set ``key`` of every batch."""
    def change(data: dict[str, Any]) -> None:
        for entry in data["batches"]:
            entry[key] = value
    return change


def _item(key: str, i: int, value: Any) -> Callable[[dict[str, Any]], None]:
    """Set item ``i`` of the list ``key`` of cap 1."""
    return lambda data: data["caps"][1][key].__setitem__(i, value)


NAN, INF = float("nan"), float("inf")
DAMAGES: list[tuple[str, str, Callable[[dict[str, Any]], None], str]] = [
    ("compute_time_nan", COMPUTE, row("forward_ms", NAN),
     "entry 2: forward_ms must be a finite number of at least 0, got NaN"),
    ("compute_time_minus_infinity", COMPUTE, row("backward_ms", -INF, 0), "entry 0: backward_ms must be a finite "
     "number of at least 0, got -Infinity"),
    ("compute_time_negative", COMPUTE, row("forward_ms", -6000.0), "forward_ms must be a finite number of at least 0, "
     "got -6000.0"),
    ("compute_step_of_zero_ms", COMPUTE, _zero_step, "entry 1: a step of 0 ms"),
    ("compute_time_a_string", COMPUTE, row("optimizer_ms", "12.5"), 'optimizer_ms must be a finite number of at '
     'least 0, got "12.5"'),
    ("compute_iterations_a_boolean", COMPUTE, row("iterations", True), "iterations must be an integer of at least 1, "
     "got true"),
    ("compute_batch_twice", COMPUTE, _extend, "a batch is listed once"),
    ("compute_forward_of_1e300_ms", COMPUTE, _every("forward_ms", 1e300), "entry 0: forward_ms must be at most "
     "86,400,000 ms (a day), got 1e+300"),  # solve's every configuration: 0 samples/s
    ("compute_backward_of_the_largest_float", COMPUTE, row("backward_ms", 1.7976931348623157e308, 1), "entry 1: "
     "backward_ms must be at most 86,400,000 ms (a day), got 1.7976931348623157e+308"),
    ("memory_batch_negative", MEMORY, row("batch", -4, 0), "entry 0: batch must be an integer of at least 1, got -4"),
    ("memory_virtual_workers_nan", MEMORY, row("virtual_workers", NAN), "virtual_workers must be an integer of at "
     "least 0, got NaN"),
    ("memory_limit_zero", MEMORY, lambda d: d.update(limit_bytes=0), "limit_bytes must be an integer of at least 1"),
    ("memory_max_batch_zero", MEMORY, lambda d: d.update(max_batch=0), "max_batch must be an integer of at least 1 "
     "or null"),
    ("memory_fits_a_string", MEMORY, row("fits", "yes"), 'fits must be true or false, got "yes"'),
    ("memory_peak_a_boolean", MEMORY, row("peak_bytes", False, 0), "peak_bytes must be an integer of at least 0 or "
     "null, got false"),
    ("buckets_cap_nan", BUCKETS, row("cap_mb", NAN, 0), "entry 0: cap_mb must be a finite number above 0, got NaN"),
    ("buckets_cap_zero", BUCKETS, row("cap_mb", 0, 0), "entry 0: cap_mb must be a finite number above 0, got 0"),
    ("buckets_allreduce_time_a_string", BUCKETS, _item("allreduce_ms", 3, "0.2"), 'entry 1: allreduce_ms[3] must '
     'be a finite number of at least 0, got "0.2"'),
    ("buckets_allreduce_time_negative", BUCKETS, _item("allreduce_ms", 0, -0.1), "entry 1: allreduce_ms[0] must "
     "be a finite number of at least 0, got -0.1"),
    ("buckets_bucket_bytes_fractional", BUCKETS, _item("bucket_bytes", 0, 0.5), "entry 1: bucket_bytes[0] must be "
     "an integer of at least 0, got 0.5"),
    ("buckets_comm_model_latency_infinite", BUCKETS, lambda d: d["comm_model"].update(latency_ms=INF),
     "comm_model: latency_ms must be a finite number of at least 0, got Infinity"),
    ("buckets_comm_model_samples_a_string", BUCKETS, lambda d: d["comm_model"].update(samples="66"),
     "comm_model: samples must be an integer of at least 0"),
    ("buckets_world_size_zero", BUCKETS, lambda d: d.update(world_size=0), "world_size must be an integer of at "
     "least 1"),
    ("buckets_exposed_of_1e300_ms", BUCKETS, row("exposed_comm_ms", 1e300, 1), "entry 1: exposed_comm_ms must be "
     "at most 86,400,000 ms (a day), got 1e+300"),
    ("buckets_allreduce_of_1e300_ms", BUCKETS, _item("allreduce_ms", 2, 1e300), "entry 1: allreduce_ms[2] must be "
     "at most 86,400,000 ms (a day)"),
    ("buckets_comm_model_slope_of_1e300_ms", BUCKETS, lambda d: d["comm_model"].update(ms_per_mb=1e300),
     "comm_model: ms_per_mb must be at most 86,400,000 ms (a day)"),
    ("buckets_exposed_negative", BUCKETS, row("exposed_comm_ms", -0.5, 1), "exposed_comm_ms must be a finite "
     "number of at least 0 or null, got -0.5"),
]


def register(name: str, make: Callable[[Path], Scenario]) -> None:
    """``make`` as the case ``profile-<name>``."""
    named("profile", name, make)


for _name, _file, _change, _phrase in DAMAGES:
    register(_name, lambda tmp, f=_file, c=_change, p=_phrase: damaged(tmp, f, c, p))


@case("profile")
def memory_static_beyond_a_float(tmp: Path) -> Scenario:
    text = (PROFILES / MEMORY).read_text().replace('"static_bytes": ', '"static_bytes": 1e400, "was": ', 1)
    folder = profiles(tmp, MEMORY, text=text)
    return solve(folder, "static_bytes must be an integer of at least 0, got Infinity", folder / MEMORY)


# --- files that are not profiles, in the folder `solve` reads and in one `profile merge` gathers ---------------

NOT_PROFILES: list[tuple[str, str, Callable[[Path], Any], str]] = [
    ("a_json_list", COMPUTE, lambda p: p.write_text("[1, 2, 3]"), "not a traceql profile (expected a JSON object"),
    ("empty", COMPUTE, lambda p: p.write_text(""), "empty file"),
    ("folder_named_json", "x.json", Path.mkdir, "is a folder, not a JSON file"),
    ("link_loop", "x.json", lambda p: p.symlink_to(p.name), "cannot read it"),
    ("a_pipe", "x.json", os.mkfifo, "not a regular file"),
]


def _not_a_profile(tmp: Path, name: str, make: Callable[[Path], Any], phrase: str, command: str) -> Scenario:
    folder = profiles(tmp)
    make(folder / name)
    return (solve if command == "solve" else merge)(folder, phrase, folder / name)


for _name, _file, _make, _phrase in NOT_PROFILES:
    for _command in ("solve", "merge"):
        register(f"{_command}_{_name}", lambda tmp, f=_file, m=_make, p=_phrase, c=_command:
                 _not_a_profile(tmp, f, m, p, c))


def _cluster(tmp: Path, count: str) -> Scenario:
    cluster = tmp / "cluster.json"
    cluster.write_text('{"nodes": [{"name": "a", "gpu": "NVIDIA H200", "count": ' + count + "}]}")
    return solve(profiles(tmp), f"node 0 (a): count must be an integer of at least 1, got {count}", cluster,
                 cluster=cluster)


register("cluster_count_nan", lambda tmp: _cluster(tmp, "NaN"))
register("cluster_count_infinite", lambda tmp: _cluster(tmp, "Infinity"))
register("cluster_count_a_fraction", lambda tmp: _cluster(tmp, "1.5"))


# --- profile memory | compute: options and outputs, refused before any model runs -------------------------------

def model(tmp: Path) -> Path:
    folder = tmp / "tiny"
    shutil.copytree(TINY, folder, ignore=shutil.ignore_patterns("__pycache__", "run", "runs"))
    return folder


def model_inputs(folder: Path) -> list[Path]:
    return sorted(folder.iterdir())


def memory_limit(tmp: Path, limit: str, phrase: str) -> Scenario:
    folder = model(tmp)
    return Scenario(["profile", "memory", folder, "--memory-limit", limit, "--out", tmp / "p"], 2, phrase, None,
                    model_inputs(folder), [tmp / "p"])


for _name, _limit, _phrase in [("beyond_a_float", "1e400GB", "--memory-limit '1e400GB': must be a finite size"),
                               ("nan", "nan", "--memory-limit 'nan': must be a finite size"),
                               ("infinite", "inf", "--memory-limit 'inf': must be a finite size"),
                               ("negative", "-4GB", "at least 1 byte")]:
    register(f"memory_limit_{_name}", lambda tmp, m=_limit, p=_phrase: memory_limit(tmp, m, p))


@case("profile")
def memory_on_cpu_without_a_limit(tmp: Path) -> Scenario:
    """No GPU (the copy's global_config.json hides them, as on a GPU machine too): a usage error, refused before
    the model runs."""
    folder = model(tmp)
    config = folder / "global_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "cuda_visible_devices": "-1"}))
    return Scenario(["profile", "memory", folder, "--out", tmp / "p"], 2, "--memory-limit: torch sees no GPU here, "
                    "and on CPU the memory search needs a limit", None, model_inputs(folder), [tmp / "p"])


@case("profile")
def memory_out_an_existing_file(tmp: Path) -> Scenario:
    folder, out = model(tmp), tmp / "profiles.json"
    out.write_text("keep me\n")
    return Scenario(["profile", "memory", folder, "--memory-limit", "4MB", "--out", out], 2,
                    "is a file, not a folder", out, [*model_inputs(folder), out])


@case("profile")
def memory_out_the_input_folder(tmp: Path) -> Scenario:
    folder = model(tmp)
    return Scenario(["profile", "memory", folder, "--memory-limit", "4MB", "--out", folder], 2,
                    "is the model's input folder", folder, model_inputs(folder), [folder / "memory-cpu.json"])


@case("profile")
def compute_out_an_existing_file(tmp: Path) -> Scenario:
    folder, out = model(tmp), tmp / "profiles"
    out.write_text("keep me\n")
    return Scenario(["profile", "compute", folder, "--out", out], 2, "is a file, not a folder", out,
                    [*model_inputs(folder), out])


# --- profile merge ---------------------------------------------------------------------------------------------

def merge(folder: Path, phrase: str, names: Path | None, out: Path | None = None) -> Scenario:
    out = out or folder.parent / "merged"
    inputs = sorted(p for p in folder.iterdir() if p.is_file() and not p.is_symlink())
    return Scenario(["profile", "merge", folder, "--out", out], 2, phrase, names, inputs,
                    [] if out.is_file() else [out])


@case("profile")
def merge_out_an_existing_file(tmp: Path) -> Scenario:
    folder, out = profiles(tmp), tmp / "merged"
    out.write_text("keep me\n")
    scenario = merge(folder, "is a file, not a folder", out, out)
    scenario.inputs.append(out)
    return scenario


@case("profile")
def merge_out_inside_a_merged_folder(tmp: Path) -> Scenario:
    folder = profiles(tmp)
    return merge(folder, "lies inside the input", None, folder / "all")


@case("profile")
def merge_a_profile_with_nan(tmp: Path) -> Scenario:
    folder = profiles(tmp, COMPUTE, lambda d: {**d, "batches": [{**d["batches"][0], "forward_ms": float("nan")}]})
    return merge(folder, "entry 0: forward_ms must be a finite number", folder / COMPUTE)


@case("profile")
def merge_two_models(tmp: Path) -> Scenario:
    folder = profiles(tmp, COMPUTE, lambda d: {**d, "model": "resnet50"})
    return merge(folder, "holds one model's profiles", folder / COMPUTE)
