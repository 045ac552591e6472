"""Outputs that cannot or must not be written, wrong options, and sweep files of the wrong shape."""

from __future__ import annotations

from pathlib import Path

from tests.bad_inputs.scenario import Scenario, case, kineto_copy, sqlite_copy
from tests.paths import ROOT

# --- outputs -------------------------------------------------------------------------------------------------

@case("output")
def detect_out_is_the_input(tmp: Path) -> Scenario:
    path = kineto_copy(tmp, name="cases.json")
    return Scenario(["detect", path, "--out", path], 2, "that is an input trace", None, [path])


@case("output")
def query_output_is_the_input(tmp: Path) -> Scenario:
    path = kineto_copy(tmp, name="trace.json")
    return Scenario(["query", path, "SELECT 1", "--format", "json", "--output", path], 2, "that is an input trace",
                    None, [path])


@case("output")
def export_output_is_the_input(tmp: Path) -> Scenario:
    path = kineto_copy(tmp, name="trace.json")
    return Scenario(["export", "perfetto", path, "-o", path], 2, "that is an input trace", None, [path])


@case("output")
def out_in_a_missing_folder(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp)
    return Scenario(["detect", path, "--out", tmp / "no" / "cases.parquet"], 2, "does not exist", tmp / "no", [path])


@case("output")
def out_is_a_folder(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp)
    (tmp / "cases.parquet").mkdir()
    return Scenario(["detect", path, "--out", tmp / "cases.parquet"], 2, "is a directory", tmp / "cases.parquet",
                    [path])


@case("output")
def out_where_nothing_can_be_written(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp)
    return Scenario(["detect", path, "--out", "/proc/cases.parquet"], 1, "cannot write", None, [path])


@case("output")
def out_with_an_unknown_suffix(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp)
    return Scenario(["detect", path, "--out", tmp / "cases.txt"], 2, "give a .parquet, .csv or .json file", None,
                    [path], [tmp / "cases.txt"])


@case("output")
def report_not_html(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp)
    return Scenario(["report", path, "-o", tmp / "r.pdf"], 2, "a report is an .html file", None, [path])


@case("output")
def parquet_to_the_terminal(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp)
    return Scenario(["query", path, "SELECT 1", "--format", "parquet"], 1, "give --output PATH", None, [path])


# --- options -------------------------------------------------------------------------------------------------

@case("usage")
def threshold_too_low(tmp: Path) -> Scenario:
    return Scenario(["detect", "--threshold", "0.5"], 2, "--threshold must be above 1.0")


@case("usage")
def threshold_not_a_number(tmp: Path) -> Scenario:
    return Scenario(["detect", "--threshold", "high"], 2, "Invalid value for '--threshold'")


@case("usage")
def unknown_option(tmp: Path) -> Scenario:
    return Scenario(["info", "--verbose-please"], 2, "No such option")


@case("usage")
def missing_argument(tmp: Path) -> Scenario:
    return Scenario(["query"], 2, "Missing argument")


@case("usage")
def step_not_in_the_trace(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp)
    return Scenario(["report", path, "--step", "99", "-o", tmp / "r.html"], 2, "no normal step 99", None, [path],
                    [tmp / "r.html"])


@case("usage")
def bad_set_override(tmp: Path) -> Scenario:
    return Scenario(["collect", ROOT / "datasets" / "examples" / "tiny", "--set", "cap_size", "--out", tmp / "r"], 2,
                    "expected KEY=VALUE", None, [], [tmp / "r"])


# --- sweeps --------------------------------------------------------------------------------------------------

def sweep(tmp: Path, spec: str, phrase: str) -> Scenario:
    (tmp / "sweep.json").write_text(spec)
    return Scenario(["dataset", "build", tmp / "sweep.json", "--out", tmp / "ds"], 2, phrase, tmp / "sweep.json",
                    [tmp / "sweep.json"], [tmp / "ds"])


@case("sweep")
def steps_not_a_number(tmp: Path) -> Scenario:
    return sweep(tmp, '{"inputs": ["../gpt2"], "steps": "many"}', 'steps must be an integer of at least 1, got "many"')


@case("sweep")
def inputs_not_a_list(tmp: Path) -> Scenario:
    return sweep(tmp, '{"inputs": "../gpt2"}', "inputs must be a list of at least 1 item")


@case("sweep")
def sweep_not_json(tmp: Path) -> Scenario:
    return sweep(tmp, "{inputs: }", "invalid JSON")


@case("sweep")
def grid_of_unknown_keys(tmp: Path) -> Scenario:
    return sweep(tmp, '{"inputs": ["../gpt2"], "grid": {"lr": [1]}}', "grid: unknown key(s) lr; keys must be among")
