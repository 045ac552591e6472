"""Traces odd in ways a reader must name: huge ranks and steps, long names, damaged pages, dangling strings, a BOM."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from tests.bad_inputs.scenario import (
    KERNELS,
    Scenario,
    case,
    detect,
    kineto_compute,
    kineto_copy,
    named,
    sqlite_copy,
    sqlite_count,
)
from tests.paths import DDP_FILES, SINGLE_FILE

# --- step numbers and ranks past what the model holds ------------------------------------------------------------


@case("sources")
def nvtx_step_past_32_bits(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp, "UPDATE NVTX_EVENTS SET text = 'step_3000000000' WHERE text = 'step_3'")
    n = sqlite_count("SELECT count(*) FROM NVTX_EVENTS WHERE text = 'step_3'")
    return detect(path, 0, f"nvtx: {n} step ranges ignored with a step number past 2,147,483,647 "
                           "(e.g. step_3000000000)")


@case("sources")
def nvtx_step_of_a_hundred_digits(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp, "UPDATE NVTX_EVENTS SET text = 'step_' || replace(printf('%.100d', 0), '0', '9') "
                            "WHERE text LIKE 'step_%'")
    n = sqlite_count("SELECT count(*) FROM NVTX_EVENTS WHERE text LIKE 'step_%'")
    return detect(path, 0, f"nvtx: {n} step ranges ignored with a step number past 2,147,483,647 (e.g. step_999")


def _rank(value: object) -> dict:
    return {"distributedInfo": {"backend": "nccl", "rank": value, "world_size": 2}}


@case("sources")
def kineto_rank_1e30(tmp: Path) -> Scenario:
    path = kineto_copy(tmp, top=_rank(1e30), name="trace.json")
    return detect(path, 0, "distributedInfo.rank '1e+30' is not a rank")


@case("sources")
def kineto_rank_a_word(tmp: Path) -> Scenario:
    path = kineto_copy(tmp, top=_rank("zero"), name="trace.json")
    return detect(path, 0, "distributedInfo.rank 'zero' is not a rank")


@case("sources")
def kineto_rank_negative(tmp: Path) -> Scenario:
    path = kineto_copy(tmp, top=_rank(-1), name="trace.json")
    return detect(path, 0, "distributedInfo.rank '-1' is not a rank")


@case("sources")
def kineto_rank_a_boolean(tmp: Path) -> Scenario:
    path = kineto_copy(tmp, top=_rank(True), name="trace.json")
    return detect(path, 0, "distributedInfo.rank 'True' is not a rank")


@case("sources")
def rank_in_the_name_past_32_bits(tmp: Path) -> Scenario:
    folder = tmp / "traces"
    folder.mkdir()
    path = folder / "gpt2_rank99999999999.sqlite"
    shutil.copyfile(DDP_FILES[0], path)
    return detect(path, 0, "the rank in its name (99999999999) is past 2147483647")


# --- names and bytes a file system or a reader trips on ----------------------------------------------------------


@case("sources")
def input_name_too_long(tmp: Path) -> Scenario:
    path = tmp / ("r" * 300 + ".sqlite")
    return Scenario(["detect", path], 2, "file name too long", path, [])


@case("sources")
def input_in_a_folder_that_is_a_file(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp)
    return Scenario(["detect", path / "report.sqlite"], 2, "no such file or directory", path / "report.sqlite",
                    [path])


@case("sources")
def input_with_a_nul_character(tmp: Path) -> Scenario:
    return Scenario(["detect", f"{tmp}/re\x00port.sqlite"], 2, "embedded null byte", None, [])


@case("sources")
def kineto_with_a_byte_order_mark(tmp: Path) -> Scenario:
    path = kineto_copy(tmp)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    return Scenario(["detect", path], 0, "", None, [path], shows=kineto_compute())


@case("sources")
def kineto_gzip_with_a_byte_order_mark(tmp: Path) -> Scenario:
    import gzip

    path = kineto_copy(tmp)
    gz = tmp / "rank0.json.gz"
    gz.write_bytes(gzip.compress(b"\xef\xbb\xbf" + path.read_bytes()))
    path.unlink()
    return Scenario(["detect", gz], 0, "", None, [gz], shows=kineto_compute())


@case("sources")
def kineto_number_of_5000_digits(tmp: Path) -> Scenario:
    path = kineto_copy(tmp)
    text = path.read_text()
    at = text.index('"ts": ', text.index('"cat": "kernel"'))  # a kernel's start
    path.write_text(text[:at] + '"ts": ' + "9" * 5000 + ', "was": ' + text[at + 6:])
    return detect(path, 0, "kernels: 1 rows dropped with no start or end time")


# --- damaged or foreign values in an nsys export ------------------------------------------------------------------


@case("sources")
def damaged_page_in_the_kernel_table(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp)
    con = sqlite3.connect(path)
    root = con.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", [KERNELS]).fetchone()[0]
    page = con.execute("PRAGMA page_size").fetchone()[0]
    con.close()
    data = bytearray(path.read_bytes())
    data[(root - 1) * page:root * page] = b"\xa5" * page  # the table's root page: its rows cannot be reached
    path.write_bytes(bytes(data))
    return detect(path, 2, "damaged SQLite database")


# (case, table, SQL that damages rows of it, which rows, the warning detect gives after the table and their
# count; it labels what is left, exit 0)
EDITS: list[tuple[str, str, str, str, str]] = [
    ("dangling_name_ids", KERNELS, "SET shortName = 999999999, demangledName = 999999999", "rowid % 20 = 0",
     "kernels: {n:,} kernels name string ids that its StringIds table lacks (e.g. 999999999)"),
    ("device_id_past_32_bits", KERNELS, "SET deviceId = 5000000000", "rowid % 50 = 0",
     "kernels: {n:,} values of device out of its range kept as NULL (e.g. 5000000000)"),
    ("grid_past_32_bits", KERNELS, "SET gridX = 9000000000", "rowid % 50 = 0",
     "kernels: {n:,} values of grid_x out of its range kept as NULL (e.g. 9000000000)"),
    ("time_past_64_bits", KERNELS, 'SET "end" = 9223372036854775807, start = -9223372036854775807',
     "rowid % 50 = 0", "kernels: {n:,} rows dropped with a duration out of range"),
    ("names_not_utf8", "StringIds", "SET value = value || CAST(x'e9fffe' AS TEXT)", "id % 7 = 0",
     "{n:,} text values (names, NVTX ranges) hold bytes that are not UTF-8: read from a temporary copy"),
]


def _edited(tmp: Path, table: str, change: str, where: str, phrase: str) -> Scenario:
    n = sqlite_count(f"SELECT count(*) FROM {table} WHERE {where}")
    return detect(sqlite_copy(tmp, f"UPDATE {table} {change} WHERE {where}"), 0, phrase.format(n=n))


for _name, *_edit in EDITS:
    named("sources", _name, lambda tmp, e=tuple(_edit): _edited(tmp, *e))


@case("sources")
def nvtx_text_in_latin_1(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp, "UPDATE NVTX_EVENTS SET text = CAST(x'e9' AS TEXT) || text WHERE text IS NOT NULL")
    n = sqlite_count("SELECT count(*) FROM NVTX_EVENTS WHERE text IS NOT NULL")
    return Scenario(["detect", path], 0, f"{n:,} text values (names, NVTX ranges) hold bytes that are not UTF-8",
                    path, [path], [tmp / "report.sqlite-journal"])


@case("sources")
def nsys_report_renamed_sqlite(tmp: Path) -> Scenario:
    path = tmp / "report.sqlite"
    path.write_bytes(b"NVIDIA Tegra Profiler Report 36398880.\n" + b"\0" * 64)
    return detect(path, 2, "nsys export --type sqlite")


@case("sources")
def manifest_listing_a_trace_outside(tmp: Path) -> Scenario:
    run = tmp / "run"
    (run / "traces").mkdir(parents=True)
    shutil.copyfile(SINGLE_FILE, run / "traces" / "a.sqlite")
    manifest = {"format": "traceql-run/1", "status": "complete", "files": {"traces": ["../../etc/passwd"]}}
    (run / "manifest.json").write_text(json.dumps(manifest))
    return Scenario(["detect", run], 2, "lists a trace outside the run folder", None, [run / "manifest.json"])


@case("sources")
def folder_of_folders_of_traces(tmp: Path) -> Scenario:
    """Traces one level down: the folder is refused, naming the folders to give instead."""
    for name in ("control", "test"):
        (tmp / "runs" / name).mkdir(parents=True)
        shutil.copyfile(SINGLE_FILE, tmp / "runs" / name / "a.sqlite")
    return Scenario(["detect", tmp / "runs"], 2, "traces are in its folder(s) control, test: give those",
                    tmp / "runs", [tmp / "runs" / "control" / "a.sqlite"])


@case("sources")
def report_of_an_input_name_too_long(tmp: Path) -> Scenario:
    path = tmp / ("r" * 300 + ".sqlite")
    return Scenario(["report", path, "-o", tmp / "r.html"], 2, "file name too long", path, [], [tmp / "r.html"])
