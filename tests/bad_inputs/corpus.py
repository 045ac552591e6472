"""A corpus of bad inputs, made at test time from the shipped traces (nothing binary is committed).

Each case builds its files in a temporary folder and returns the command to run and what must happen: the
exit code, a phrase of the one ``error:`` line (or of a warning, for data that is still usable), the file
that line must name, and the inputs whose bytes must not change.
"""

from __future__ import annotations

import functools
import gzip
import json
import os
import shutil
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.paths import DDP_FILE, ROOT, RUNS, SINGLE_FILE

KINETO = RUNS / "gpt2-torch" / "traces" / "gpt2-torch_rank0.json.gz"
NCU_DETAILS = ROOT / "datasets" / "ncu" / "toy_single_details.csv"
NCU_RAW = ROOT / "datasets" / "ncu" / "toy_single_raw12.csv"
KERNELS = "CUPTI_ACTIVITY_KIND_KERNEL"
# the kernel table again, without its NOT NULL constraints (a damaged or foreign export may lack them)
LOOSE = [f"CREATE TABLE k2 AS SELECT * FROM {KERNELS}", f"DROP TABLE {KERNELS}", f"ALTER TABLE k2 RENAME TO {KERNELS}"]


@dataclass
class Scenario:
    args: list[object]
    code: int
    phrase: str
    names: Path | None = None  # the file the error line must name
    inputs: list[Path] = field(default_factory=list)  # their bytes, and their folders' listings, stay the same
    absent: list[Path] = field(default_factory=list)  # files that must not exist afterwards


CASES: dict[str, Callable[[Path], Scenario]] = {}


def case(group: str) -> Callable:
    def register(make: Callable[[Path], Scenario]) -> Callable[[Path], Scenario]:
        CASES[f"{group}-{make.__name__}"] = make
        return make
    return register


def sqlite_copy(tmp: Path, *statements: str, source: Path = SINGLE_FILE, name: str = "report.sqlite") -> Path:
    path = tmp / name
    shutil.copyfile(source, path)
    con = sqlite3.connect(path)
    for statement in statements:
        con.execute(statement)
    con.commit()
    con.close()
    return path


def detect(path: Path, code: int, phrase: str, *more: object, names: bool = True) -> Scenario:
    return Scenario(["detect", path, *more], code, phrase, path if names else None, [path])


@functools.cache
def _kineto() -> dict:
    return json.loads(gzip.decompress(KINETO.read_bytes()))


def kineto_copy(tmp: Path, change: Callable[[dict], dict | None] | None = None, *, top: dict | None = None,
                name: str = "rank0.json") -> Path:
    """The torch.profiler trace with each event passed through ``change`` (None drops it)."""
    data = _kineto()
    events = [e for e in (change(dict(e)) if change else e for e in data["traceEvents"]) if e is not None]
    path = tmp / name
    path.write_text(json.dumps({**data, "traceEvents": events, **(top or {})}))
    return path


def kernels_only(change: Callable[[dict], dict | None]) -> Callable[[dict], dict | None]:
    return lambda e: change(e) if e.get("cat") == "kernel" else e


# --- files that are not traces -------------------------------------------------------------------------------

@case("file")
def missing(tmp: Path) -> Scenario:
    return detect(tmp / "nope.sqlite", 2, "no such file or directory")


@case("file")
def empty_file(tmp: Path) -> Scenario:
    (tmp / "report.sqlite").touch()
    return detect(tmp / "report.sqlite", 2, "empty file (0 bytes)")


@case("file")
def text_file(tmp: Path) -> Scenario:
    (tmp / "report.sqlite").write_text("hello\n")
    return detect(tmp / "report.sqlite", 2, "not a trace traceql can read")


@case("file")
def folder_without_traces(tmp: Path) -> Scenario:
    (tmp / "run").mkdir()
    (tmp / "run" / "notes.txt").write_text("x")
    return Scenario(["detect", tmp / "run"], 2, "directory holds no traces", tmp / "run")


@case("file")
def folder_named_like_a_trace(tmp: Path) -> Scenario:
    (tmp / "x.sqlite").mkdir()
    return Scenario(["info", tmp / "x.sqlite"], 2, "directory holds no traces", tmp / "x.sqlite")


@case("file")
def named_pipe(tmp: Path) -> Scenario:
    os.mkfifo(tmp / "pipe.sqlite")
    return Scenario(["info", tmp / "pipe.sqlite"], 2, "not a regular file", tmp / "pipe.sqlite")


@case("file")
def dangling_link(tmp: Path) -> Scenario:
    (tmp / "link.sqlite").symlink_to(tmp / "gone.sqlite")
    return Scenario(["info", tmp / "link.sqlite"], 2, "a link to nothing", tmp / "link.sqlite")


@case("file")
def device(tmp: Path) -> Scenario:
    return Scenario(["info", Path("/dev/zero")], 2, "not a regular file", Path("/dev/zero"))


@case("file")
def nsys_report(tmp: Path) -> Scenario:
    (tmp / "run.nsys-rep").write_bytes(b"NVIDIA Tegra Profiler Report 3.0\n" + b"\0" * 64)
    return detect(tmp / "run.nsys-rep", 2, "nsys export --type sqlite")


@case("file")
def folder_of_reports(tmp: Path) -> Scenario:
    (tmp / "reps").mkdir()
    (tmp / "reps" / "a.nsys-rep").write_bytes(b"NVIDIA Tegra Profiler Report\n")
    return Scenario(["info", tmp / "reps"], 2, ".nsys-rep report(s): export them", tmp / "reps")


@case("file")
def given_twice(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp)
    return Scenario(["info", path, path], 2, "given twice", path, [path])


# --- SQLite exports ------------------------------------------------------------------------------------------

@case("sqlite")
def truncated(tmp: Path) -> Scenario:
    path = tmp / "report.sqlite"
    path.write_bytes(SINGLE_FILE.read_bytes()[:50_000])
    return detect(path, 2, "truncated SQLite database")


@case("sqlite")
def corrupt_header(tmp: Path) -> Scenario:
    path = tmp / "report.sqlite"
    path.write_bytes(b"SQLite format 2\x00" + SINGLE_FILE.read_bytes()[16:4096])
    return detect(path, 2, "corrupt SQLite header")


@case("sqlite")
def corrupt_pages(tmp: Path) -> Scenario:
    data = bytearray(SINGLE_FILE.read_bytes())
    data[4096:len(data) // 2] = b"\xff" * (len(data) // 2 - 4096)
    path = tmp / "report.sqlite"
    path.write_bytes(bytes(data))
    return detect(path, 2, "cannot read this SQLite database")


@case("sqlite")
def not_an_export(tmp: Path) -> Scenario:
    path = tmp / "other.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE measurements (x INTEGER)")
    con.close()
    return detect(path, 2, "not an Nsight Systems export")


@case("sqlite")
def no_kernel_table(tmp: Path) -> Scenario:
    return detect(sqlite_copy(tmp, f"DROP TABLE {KERNELS}"), 3, "was it run with `-t cuda`?")


@case("sqlite")
def empty_kernel_table(tmp: Path) -> Scenario:
    return detect(sqlite_copy(tmp, f"DELETE FROM {KERNELS}"), 3, "did the capture range ever start")


@case("sqlite")
def kernel_table_missing_a_column(tmp: Path) -> Scenario:
    return detect(sqlite_copy(tmp, f"ALTER TABLE {KERNELS} DROP COLUMN gridX"), 3, "lacks a table or column")


@case("sqlite")
def no_string_table(tmp: Path) -> Scenario:
    return detect(sqlite_copy(tmp, "DROP TABLE StringIds"), 3, "StringIds")


@case("sqlite")
def every_start_missing(tmp: Path) -> Scenario:
    return detect(sqlite_copy(tmp, *LOOSE, f"UPDATE {KERNELS} SET start = NULL"), 3, "has usable times")


@case("sqlite")
def some_starts_missing(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp, *LOOSE, f"UPDATE {KERNELS} SET start = NULL WHERE rowid % 50 = 0")
    return detect(path, 0, "rows dropped with no start or end time")


@case("sqlite")
def some_end_before_start(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp, f'UPDATE {KERNELS} SET "end" = start - 1000 WHERE rowid % 40 = 0')
    return detect(path, 0, "rows dropped with an end before its start")


@case("sqlite")
def every_end_before_start(tmp: Path) -> Scenario:
    return detect(sqlite_copy(tmp, f'UPDATE {KERNELS} SET "end" = start - 1'), 3, "has usable times")


@case("sqlite")
def every_row_twice(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp, f"INSERT INTO {KERNELS} SELECT * FROM {KERNELS}")
    return detect(path, 0, "exact duplicate rows dropped")


@case("sqlite")
def zero_durations(tmp: Path) -> Scenario:
    return detect(sqlite_copy(tmp, f'UPDATE {KERNELS} SET "end" = start'), 3, "lasts 0 ns")


@case("sqlite")
def text_in_a_time_column(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp, f"UPDATE {KERNELS} SET start = 'soon' WHERE rowid % 30 = 0")
    return detect(path, 2, "a column holds values of the wrong type")


@case("sqlite")
def huge_real_in_a_time_column(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp, f"UPDATE {KERNELS} SET start = 1e300 WHERE rowid % 30 = 0")
    return detect(path, 2, "a column holds values of the wrong type")


@case("sqlite")
def dangling_string_ids(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp, f"UPDATE {KERNELS} SET shortName = 999999999, demangledName = 999999999 "
                            "WHERE rowid % 20 = 0")
    return detect(path, 0, "")


@case("sqlite")
def wal_mode(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp, "PRAGMA journal_mode=WAL")
    return Scenario(["detect", path], 0, "WAL mode; read from a temporary copy", None, [path],
                    [tmp / "report.sqlite-wal", tmp / "report.sqlite-shm"])


@case("sqlite")
def garbage_step_names(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp, "UPDATE NVTX_EVENTS SET text = 'step_x' WHERE text LIKE 'step_%'")
    return detect(path, 0, "")


# --- Kineto JSON ---------------------------------------------------------------------------------------------

@case("kineto")
def not_json(tmp: Path) -> Scenario:
    (tmp / "rank0.json").write_text("{ this is not json")
    return detect(tmp / "rank0.json", 2, "invalid JSON")


@case("kineto")
def truncated_json(tmp: Path) -> Scenario:
    path = kineto_copy(tmp)
    path.write_text(path.read_text()[:100_000])
    return detect(path, 2, "the file ends early")


@case("kineto")
def truncated_gzip(tmp: Path) -> Scenario:
    path = tmp / "rank0.json.gz"
    path.write_bytes(KINETO.read_bytes()[:20_000])
    return detect(path, 2, "")


@case("kineto")
def corrupt_gzip(tmp: Path) -> Scenario:
    data = bytearray(KINETO.read_bytes())
    data[100:5000] = b"\x00" * 4900
    path = tmp / "rank0.json.gz"
    path.write_bytes(bytes(data))
    return detect(path, 2, "corrupt gzip")


@case("kineto")
def json_array(tmp: Path) -> Scenario:
    (tmp / "rank0.json").write_text("[1, 2, 3]")
    return detect(tmp / "rank0.json", 2, "not a trace traceql can read")


@case("kineto")
def no_trace_events(tmp: Path) -> Scenario:
    (tmp / "rank0.json").write_text('{"schemaVersion": 1}')
    return detect(tmp / "rank0.json", 2, "no traceEvents array")


@case("kineto")
def trace_events_not_a_list(tmp: Path) -> Scenario:
    (tmp / "rank0.json").write_text('{"traceEvents": {"a": 1}}')
    return detect(tmp / "rank0.json", 2, "invalid JSON: expected '['")


@case("kineto")
def nested_too_deeply(tmp: Path) -> Scenario:
    (tmp / "rank0.json").write_text('{"traceEvents": [' + "[" * 100_000 + "]" * 100_000 + "]}")
    return detect(tmp / "rank0.json", 2, "nested too deeply")


@case("kineto")
def no_gpu_activity(tmp: Path) -> Scenario:
    path = kineto_copy(tmp, lambda e: None if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") else e)
    return detect(path, 3, "no GPU activity")


@case("kineto")
def kernels_without_dur(tmp: Path) -> Scenario:
    path = kineto_copy(tmp, kernels_only(lambda e: {k: v for k, v in e.items() if k != "dur"}))
    return detect(path, 3, "lasts 0 ns")


@case("kineto")
def negative_dur(tmp: Path) -> Scenario:
    path = kineto_copy(tmp, kernels_only(lambda e: {**e, "dur": -abs(e["dur"]) if e["ts"] % 3 < 1 else e["dur"]}))
    return detect(path, 0, "rows dropped with an end before its start")


@case("kineto")
def text_timestamps(tmp: Path) -> Scenario:
    path = kineto_copy(tmp, kernels_only(lambda e: {**e, "ts": "soon"} if e["args"]["correlation"] % 7 == 0 else e))
    return detect(path, 0, "rows dropped with no start or end time")


@case("kineto")
def huge_timestamps(tmp: Path) -> Scenario:
    path = kineto_copy(tmp, kernels_only(lambda e: {**e, "ts": 1e300} if e["args"]["correlation"] % 7 == 0 else e))
    return detect(path, 0, "rows dropped with no start or end time")


@case("kineto")
def huge_durations(tmp: Path) -> Scenario:
    path = kineto_copy(tmp, kernels_only(lambda e: {**e, "dur": 10**25} if e["args"]["correlation"] % 7 == 0 else e))
    return detect(path, 0, "rows dropped with no start or end time")


@case("kineto")
def nan_timestamps(tmp: Path) -> Scenario:
    path = kineto_copy(tmp, kernels_only(lambda e: {**e, "ts": float("nan")} if e["args"]["correlation"] % 7 == 0
                                         else e))
    return detect(path, 0, "rows dropped with no start or end time")


@case("kineto")
def every_event_twice(tmp: Path) -> Scenario:
    data = _kineto()
    path = tmp / "rank0.json"
    path.write_text(json.dumps({**data, "traceEvents": data["traceEvents"] * 2}))
    return detect(path, 0, "exact duplicate rows dropped")


@case("kineto")
def args_not_an_object(tmp: Path) -> Scenario:
    return detect(kineto_copy(tmp, kernels_only(lambda e: {**e, "args": 5})), 0, "")


@case("kineto")
def grid_not_a_list(tmp: Path) -> Scenario:
    return detect(kineto_copy(tmp, kernels_only(lambda e: {**e, "args": {**e["args"], "grid": "wide"}})), 0, "")


@case("kineto")
def odd_device_and_stream(tmp: Path) -> Scenario:
    path = kineto_copy(tmp, kernels_only(lambda e: {**e, "args": {**e["args"], "device": "gpu0", "stream": [1]}}))
    return detect(path, 0, "")


@case("kineto")
def two_files_one_rank(tmp: Path) -> Scenario:
    (tmp / "run").mkdir()
    a = kineto_copy(tmp / "run", name="a.json")
    b = kineto_copy(tmp / "run", name="b.json")
    return Scenario(["detect", tmp / "run"], 2, "give one trace per rank", b, [a, b])


# --- Nsight Compute CSV --------------------------------------------------------------------------------------

@case("ncu")
def csv_of_another_tool(tmp: Path) -> Scenario:
    (tmp / "kernels.csv").write_text("a,b\n1,2\n")
    return Scenario(["detect", SINGLE_FILE, "--metrics", tmp / "kernels.csv"], 2, "not an Nsight Compute CSV",
                    tmp / "kernels.csv", [tmp / "kernels.csv"])


@case("ncu")
def no_profiled_kernels(tmp: Path) -> Scenario:
    lines = NCU_DETAILS.read_text().splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith('"ID"'))
    (tmp / "empty.csv").write_text("\n".join(lines[: head + 1]))
    return Scenario(["detect", SINGLE_FILE, "--metrics", tmp / "empty.csv"], 2, "no profiled kernels",
                    tmp / "empty.csv", [tmp / "empty.csv"])


@case("ncu")
def unknown_layout(tmp: Path) -> Scenario:
    (tmp / "x.csv").write_text('"ID","Kernel Name","Grid Size","Block Size","Note"\n"0","k","(1,1,1)","(1,1,1)","x"\n')
    return Scenario(["detect", SINGLE_FILE, "--metrics", tmp / "x.csv"], 2, "unknown ncu CSV layout", tmp / "x.csv",
                    [tmp / "x.csv"])


@case("ncu")
def duration_in_no_time_unit(tmp: Path) -> Scenario:
    text = NCU_DETAILS.read_text()
    assert '"Duration","ns"' in text
    for unit in ("ns", "usecond", "nsecond", "msecond"):
        text = text.replace(f'"Duration","{unit}"', '"Duration","furlong"')
    (tmp / "d.csv").write_text(text)
    return Scenario(["detect", SINGLE_FILE, "--metrics", tmp / "d.csv"], 2, "not a unit of time", tmp / "d.csv",
                    [tmp / "d.csv"])


@case("ncu")
def raw_page_in_microseconds(tmp: Path) -> Scenario:
    lines = NCU_RAW.read_text().splitlines()
    units = next(i for i, line in enumerate(lines) if line.startswith('"","'))
    header = lines[units - 1].split('","')
    cells = lines[units].split('","')
    cells[header.index("gpu__time_duration.sum")] = "usecond"
    lines[units] = '","'.join(cells)
    (tmp / "raw.csv").write_text("\n".join(lines))
    return Scenario(["info", tmp / "raw.csv"], 0, "", None, [tmp / "raw.csv"])


@case("ncu")
def metrics_as_the_trace(tmp: Path) -> Scenario:
    shutil.copyfile(NCU_DETAILS, tmp / "d.csv")
    return detect(tmp / "d.csv", 2, "Nsight Compute metrics are not a timeline")


# --- SQL -----------------------------------------------------------------------------------------------------

def query(tmp: Path, sql: str, phrase: str, *absent: Path) -> Scenario:
    path = sqlite_copy(tmp)
    return Scenario(["query", path, sql], 4, phrase, None, [path], list(absent))


@case("sql")
def copy_to_a_file(tmp: Path) -> Scenario:
    return query(tmp, f"COPY kernels TO '{tmp / 'out.csv'}'", "disabled by configuration", tmp / "out.csv")


@case("sql")
def attach_the_input_and_drop(tmp: Path) -> Scenario:
    return query(tmp, f"ATTACH '{tmp / 'report.sqlite'}' AS x (TYPE SQLITE); DROP TABLE x.StringIds", "SQL failed")


@case("sql")
def scan_another_sqlite(tmp: Path) -> Scenario:
    return query(tmp, f"SELECT * FROM sqlite_scan('{DDP_FILE}', 'StringIds')", "SQL failed")


@case("sql")
def read_a_system_file(tmp: Path) -> Scenario:
    return query(tmp, "SELECT * FROM read_text('/etc/passwd')", "disabled by configuration")


@case("sql")
def read_csv_anywhere(tmp: Path) -> Scenario:
    return query(tmp, "SELECT * FROM read_csv('/etc/passwd')", "disabled by configuration")


@case("sql")
def install_an_extension(tmp: Path) -> Scenario:
    return query(tmp, "INSTALL httpfs", "SQL failed")


@case("sql")
def load_an_extension(tmp: Path) -> Scenario:
    return query(tmp, "LOAD sqlite_scanner", "SQL failed")


@case("sql")
def reopen_the_doors(tmp: Path) -> Scenario:
    return query(tmp, "SET enable_external_access = true", "the configuration has been locked")


@case("sql")
def invalid_sql(tmp: Path) -> Scenario:
    return query(tmp, "SELEC 1", "Parser Error")


@case("sql")
def unknown_table(tmp: Path) -> Scenario:
    return query(tmp, "SELECT * FROM cupti", "the model's relations")


@case("sql")
def empty_sql(tmp: Path) -> Scenario:
    return query(tmp, "   ", "empty SQL query")


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
    return Scenario(["detect", path, "--out", tmp / "no" / "cases.parquet"], 1, "output directory does not exist",
                    tmp / "no", [path])


@case("output")
def out_is_a_folder(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp)
    (tmp / "cases.parquet").mkdir()
    return Scenario(["detect", path, "--out", tmp / "cases.parquet"], 1, "is a directory", tmp / "cases.parquet",
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
    return sweep(tmp, '{"inputs": ["../gpt2"], "steps": "many"}', 'steps: "many" is not a whole number')


@case("sweep")
def inputs_not_a_list(tmp: Path) -> Scenario:
    return sweep(tmp, '{"inputs": "../gpt2"}', "inputs: a list of input folders")


@case("sweep")
def sweep_not_json(tmp: Path) -> Scenario:
    return sweep(tmp, "{inputs: }", "invalid JSON")


@case("sweep")
def grid_of_unknown_keys(tmp: Path) -> Scenario:
    return sweep(tmp, '{"inputs": ["../gpt2"], "grid": {"lr": [1]}}', "grid: keys must be among")
