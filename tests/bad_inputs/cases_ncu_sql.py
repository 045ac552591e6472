"""Nsight Compute CSVs of odd layouts and units, and SQL given to `query` that reaches outside the model."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.bad_inputs.scenario import NCU_DETAILS, NCU_RAW, Scenario, case, detect, sqlite_copy
from tests.paths import DDP_FILE, SINGLE_FILE

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
    launches = len(lines) - units - 1  # a row per profiled launch below the units
    return Scenario(["info", tmp / "raw.csv"], 0, "", None, [tmp / "raw.csv"],
                    shows=f"Nsight Compute metrics: {launches} profiled launches")


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
