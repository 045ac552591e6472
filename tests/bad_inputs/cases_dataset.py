"""Sweeps and dataset folders: fields of the wrong type or range, dataset folders that cannot be written or read."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.bad_inputs.scenario import Scenario, case, named
from tests.paths import SINGLE_FILE, TINY

# --- sweep files: every field checked before anything is collected ----------------------------------------------


def sweep(tmp: Path, spec: dict | str, phrase: str) -> Scenario:
    """`dataset build` of a sweep over the tiny model: refused with exit 2 naming the sweep; no dataset made."""
    path = tmp / "sweep.json"
    path.write_text(spec if isinstance(spec, str) else json.dumps({"inputs": [str(TINY)], **spec}))
    return Scenario(["dataset", "build", path, "--out", tmp / "ds"], 2, phrase, path, [path], [tmp / "ds"])


SWEEPS: list[tuple[str, dict | str, str]] = [
    ("grid_a_number", {"grid": 5}, "grid must be an object, got 5"),
    ("grid_value_not_a_list", {"grid": {"cap_size": 2}}, "grid: cap_size must be a list of at least 1 item"),
    ("grid_empty_list", {"grid": {"batchsize": []}}, "grid: batchsize must be a list of at least 1 item"),
    ("grid_cap_negative", {"grid": {"cap_size": [1, -3]}}, "grid: cap_size[1] must be a finite number above 0, got -3"),
    ("grid_cap_beyond_a_float", f'{{"inputs": ["{TINY}"], "grid": {{"cap_size": [1e400]}}}}',
     "grid: cap_size[0] must be a finite number above 0, got Infinity"),
    ("grid_world_size_a_boolean", {"grid": {"world_size": [True]}}, "world_size[0] must be an integer of at least 1"),
    ("grid_batch_a_fraction", {"grid": {"batchsize": [8, 0.5]}}, "batchsize[1] must be an integer of at least 1"),
    ("timeout_nan", f'{{"inputs": ["{TINY}"], "timeout": NaN}}', "timeout must be a finite number above 0 or null"),
    ("timeout_negative", {"timeout": -5}, "timeout must be a finite number above 0 or null, got -5"),
    ("device_tpu", {"device": "tpu"}, 'device must be one of auto, cuda, cpu, got "tpu"'),
    ("profiler_ncu", {"profiler": "ncu"}, 'profiler must be one of nsys, torch, got "ncu"'),
    ("metrics_a_string", {"metrics": "yes"}, 'metrics must be true or false, got "yes"'),
    ("steps_zero", {"steps": 0}, "steps must be an integer of at least 1, got 0"),
    ("steps_a_fraction", {"steps": 2.5}, "steps must be an integer of at least 1, got 2.5"),
    ("inputs_empty", {"inputs": []}, "inputs must be a list of at least 1 item"),
    ("input_folder_missing", {"inputs": ["no-such-model"]}, "inputs: "),
    ("input_a_number", {"inputs": [3]}, "inputs[0] must be a folder name, got 3"),
    ("a_json_list", "[1, 2]", 'a sweep is a JSON object with "inputs"'),
    ("empty_file", "", "empty file (expected JSON)"),
    ("nested_too_deeply", "[" * 100_000 + "]" * 100_000, "nested too deeply"),
]


for _name, _spec, _phrase in SWEEPS:
    named("sweep", _name, lambda tmp, spec=_spec, p=_phrase: sweep(tmp, spec, p))


@case("sweep")
def local_config_cap_nan(tmp: Path) -> Scenario:
    """An input folder whose own local_config holds NaN: named before anything runs."""
    model = Path(shutil.copytree(TINY, tmp / "tiny"))
    (model / "local_config.json").write_text('{"world_size": 2, "cap_size": NaN, "epochs": 1, "batchsize": 8}')
    s = sweep(tmp, {"inputs": [str(model)]}, "cap_size must be a finite number above 0, got NaN")
    s.inputs.append(model / "local_config.json")
    return s


@case("sweep")
def sweep_a_folder(tmp: Path) -> Scenario:
    (tmp / "sweep.json").mkdir()
    return Scenario(["dataset", "build", tmp / "sweep.json", "--out", tmp / "ds"], 2, "is a folder", tmp / "sweep.json",
                    [], [tmp / "ds"])


# --- dataset folders that cannot be written, or whose dataset.json is not one ---------------------------------


def _add(root: Path, *sources: Path, code: int, phrase: str, names: Path | None, inputs: list[Path],
         absent: list[Path] | None = None) -> Scenario:
    return Scenario(["dataset", "add", root, *sources], code, phrase, names, inputs, absent or [])


@case("dataset")
def add_into_a_folder_that_cannot_be_written(tmp: Path) -> Scenario:
    path = tmp / "single.sqlite"
    shutil.copyfile(SINGLE_FILE, path)
    root = Path("/sys/kernel")  # a folder nobody may write in, root included
    return _add(root, path, code=2, phrase="cannot write in the dataset folder", names=root, inputs=[path])


def _add_to(tmp: Path, meta: str, phrase: str) -> Scenario:
    """`dataset add` into a folder whose dataset.json holds ``meta``: refused, nothing made beside it."""
    root = tmp / "ds"
    root.mkdir()
    (root / "dataset.json").write_text(meta)
    return _add(root, SINGLE_FILE, code=2, phrase=phrase, names=root / "dataset.json", inputs=[root / "dataset.json"],
                absent=[root / ".dataset.lock", root / "data", root / ".staging"])


named("dataset", "add_with_a_damaged_dataset_json",
      lambda tmp: _add_to(tmp, '{"format": "traceql-dataset/1", "entries": [', "invalid JSON"))
named("dataset", "add_with_dataset_json_a_list",
      lambda tmp: _add_to(tmp, "[]", "it holds a JSON list, not an object"))
named("dataset", "add_with_an_entry_outside_data",
      lambda tmp: _add_to(tmp, '{"format": "traceql-dataset/1", "entries": {"x": {"file": "/etc/passwd"}}}',
                          "is not under data/"))


@case("dataset")
def add_where_data_is_a_file(tmp: Path) -> Scenario:
    root = tmp / "ds"
    root.mkdir()
    (root / "data").write_text("not a folder\n")
    return _add(root, SINGLE_FILE, code=2, phrase="data is a file where the dataset keeps a folder", names=root,
                inputs=[root / "data"])


@case("dataset")
def add_where_the_root_is_a_file(tmp: Path) -> Scenario:
    (tmp / "ds").write_text("a file\n")
    return _add(tmp / "ds", SINGLE_FILE, code=2, phrase="is a file, not a dataset folder", names=tmp / "ds",
                inputs=[tmp / "ds"])


@case("dataset")
def add_every_entry_failing(tmp: Path) -> Scenario:
    """Every source fails: exit 1, the error on stderr, and no dataset folder made for nothing."""
    missing = tmp / "missing.sqlite"
    return _add(tmp / "ds", missing, code=1, phrase="no such file or directory", names=missing, inputs=[],
                absent=[tmp / "ds"])


@case("dataset")
def summary_of_an_entry_outside_data(tmp: Path) -> Scenario:
    root = tmp / "ds"
    root.mkdir()
    (root / "dataset.json").write_text(json.dumps({"format": "traceql-dataset/1",
                                                   "entries": {"x": {"file": "../../../etc/passwd"}}}))
    return Scenario(["dataset", "summary", root], 2, "is not under data/", root / "dataset.json",
                    [root / "dataset.json"])


@case("dataset")
def summary_where_dataset_json_is_a_folder(tmp: Path) -> Scenario:
    root = tmp / "ds"
    (root / "dataset.json").mkdir(parents=True)
    return Scenario(["dataset", "summary", root], 2, "is a folder", root / "dataset.json", [])


@case("sweep")
def out_inside_a_model_folder(tmp: Path) -> Scenario:
    model = Path(shutil.copytree(TINY, tmp / "tiny"))
    s = sweep(tmp, {"inputs": [str(model)]}, "lies inside the input")
    s.args[-1] = model / "ds"
    s.names, s.absent, s.inputs = model / "ds", [model / "ds"], [*s.inputs, model / "local_config.json"]
    return s
