"""Nsight Systems SQLite exports damaged, foreign, missing tables or columns, with impossible rows."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.bad_inputs.scenario import KERNELS, LOOSE, Scenario, case, compute_kernels, detect, kernel_rows, sqlite_copy
from tests.paths import SINGLE_FILE

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
    return detect(path, 2, "damaged SQLite database")


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
    return detect(path, 0, f"kernels: {kernel_rows('rowid % 50 = 0'):,} rows dropped with no start or end time")


@case("sqlite")
def some_end_before_start(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp, f'UPDATE {KERNELS} SET "end" = start - 1000 WHERE rowid % 40 = 0')
    return detect(path, 0, f"kernels: {kernel_rows('rowid % 40 = 0'):,} rows dropped with an end before its start")


@case("sqlite")
def every_end_before_start(tmp: Path) -> Scenario:
    return detect(sqlite_copy(tmp, f'UPDATE {KERNELS} SET "end" = start - 1'), 3, "has usable times")


@case("sqlite")
def every_row_twice(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp, f"INSERT INTO {KERNELS} SELECT * FROM {KERNELS}")
    return detect(path, 0, f"kernels: {kernel_rows('1'):,} exact duplicate rows dropped")


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
    return detect(path, 0, f"kernels: {kernel_rows('rowid % 20 = 0'):,} kernels name string ids that its StringIds "
                           "table lacks (e.g. 999999999): kept, named <unknown string ID>")


@case("sqlite")
def wal_mode(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp, "PRAGMA journal_mode=WAL")
    return Scenario(["detect", path], 0, "WAL mode; read from a temporary copy", path, [path],
                    [tmp / "report.sqlite-wal", tmp / "report.sqlite-shm"])


@case("sqlite")
def garbage_step_names(tmp: Path) -> Scenario:
    """Ranges named step_x are no steps: every kernel is read and labelled, no step is shown."""
    path = sqlite_copy(tmp, "UPDATE NVTX_EVENTS SET text = 'step_x' WHERE text LIKE 'step_%'")
    return detect(path, 0, "", shows=f"0 slowdown cases among {compute_kernels():,} compute kernels",
                  forbid="lost per step")
