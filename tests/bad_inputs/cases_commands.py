"""The other commands' inputs and outputs: links and devices as outputs, outputs inside run folders,
numbers that are not numbers, names that would drive the terminal (schedulers and workers:
``cases_parallel``)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tests.bad_inputs.scenario import Scenario, case, sqlite_copy
from tests.paths import DDP_FILE, RUNS, TINY

ESC = "\x1b"
# every kernel name carries a title-setting and a screen-clearing sequence
EVIL_NAMES = ("UPDATE StringIds SET value = value || char(27) || ']0;owned' || char(7) || char(27) || '[2J' "
              "WHERE id IN (SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL "
              "UNION SELECT shortName FROM CUPTI_ACTIVITY_KIND_KERNEL)")
SHOWN = "\\x1b]0;owned\\x07\\x1b[2J"  # how stdout shows that sequence: as its escape, inert


def run_copy(tmp: Path, name: str = "gpt2-torch") -> Path:
    """A private copy of a shipped run folder."""
    return Path(shutil.copytree(RUNS / name, tmp / name))


def run_traces(run: Path) -> list[Path]:
    return sorted(p for p in (run / "traces").iterdir() if p.is_file())


# --- outputs that are links, devices, folders, or inside what is read ------------------------------------------

@case("output")
def query_output_a_device(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp)
    return Scenario(["query", path, "SELECT 1", "-f", "csv", "--output", "/dev/full"], 2, "not a regular file",
                    None, [path])


@case("output")
def query_output_a_link_to_stdout(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp)
    (tmp / "out.csv").symlink_to("/dev/stdout")
    return Scenario(["query", path, "SELECT 1", "-f", "csv", "--output", tmp / "out.csv"], 2, "symbolic link",
                    tmp / "out.csv", [path])


@case("output")
def report_output_a_link_to_a_file(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp)
    (tmp / "kept.html").write_text("<p>the user's own page</p>\n")
    (tmp / "r.html").symlink_to(tmp / "kept.html")
    return Scenario(["report", path, "-o", tmp / "r.html"], 2, "symbolic link", tmp / "r.html",
                    [path, tmp / "kept.html"])


@case("output")
def export_output_a_fifo(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp)
    os.mkfifo(tmp / "t.json")
    return Scenario(["export", "perfetto", path, "-o", tmp / "t.json"], 2, "not a regular file", tmp / "t.json",
                    [path])


@case("output")
def detect_out_a_link_to_nothing(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp)
    (tmp / "cases.csv").symlink_to(tmp / "nowhere" / "cases.csv")
    return Scenario(["detect", path, "--out", tmp / "cases.csv"], 2, "symbolic link", tmp / "cases.csv", [path])


@case("output")
def report_inside_the_run_folder_read(tmp: Path) -> Scenario:
    run = run_copy(tmp)
    return Scenario(["report", run, "-o", run / "report.html"], 2, "lies inside", run / "report.html",
                    run_traces(run), [run / "report.html"])


@case("output")
def export_inside_the_run_folder_of_a_trace(tmp: Path) -> Scenario:
    run = run_copy(tmp)
    trace = run_traces(run)[0]
    return Scenario(["export", "perfetto", trace, "-o", run / "traces" / "t.json"], 2, "lies inside the run folder",
                    None, [trace], [run / "traces" / "t.json"])


@case("output")
def detect_out_inside_a_folder_of_traces(tmp: Path) -> Scenario:
    folder = tmp / "traces"
    folder.mkdir()
    path = sqlite_copy(folder)
    return Scenario(["detect", folder, "--out", folder / "cases.csv"], 2, "lies inside", folder / "cases.csv",
                    [path], [folder / "cases.csv"])


@case("output")
def query_output_inside_a_run_folder(tmp: Path) -> Scenario:
    run = run_copy(tmp)
    return Scenario(["query", run, "SELECT 1", "-f", "csv", "--output", run / "logs" / "q.csv"], 2, "lies inside",
                    None, run_traces(run), [run / "logs" / "q.csv"])


@case("output")
def out_name_too_long(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp)
    return Scenario(["detect", path, "--out", tmp / ("c" * 300 + ".csv")], 2, "too long", None, [path])


@case("output")
def report_output_is_a_folder(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp)
    (tmp / "r.html").mkdir()
    return Scenario(["report", path, "-o", tmp / "r.html"], 2, "is a directory", tmp / "r.html", [path])


@case("output")
def export_output_in_a_missing_folder(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp)
    return Scenario(["export", "perfetto", path, "-o", tmp / "no" / "t.json"], 2, "does not exist", tmp / "no",
                    [path])


@case("output")
def collect_out_is_a_file(tmp: Path) -> Scenario:
    (tmp / "run").write_text("a file\n")
    return Scenario(["collect", TINY, "--out", tmp / "run"], 2, "is a file, not a folder", tmp / "run",
                    [tmp / "run"])


@case("output")
def collect_out_inside_its_input(tmp: Path) -> Scenario:
    model = Path(shutil.copytree(TINY, tmp / "tiny"))
    return Scenario(["collect", model, "--out", model / "run"], 2, "lies inside the input folder", model / "run",
                    sorted(model.iterdir()), [model / "run"])


# --- numbers that are not numbers --------------------------------------------------------------------------------

@case("usage")
def threshold_nan(tmp: Path) -> Scenario:
    return Scenario(["detect", "--threshold", "nan"], 2, "--threshold must be a finite number")


@case("usage")
def threshold_infinite(tmp: Path) -> Scenario:
    return Scenario(["ranks", "--threshold", "inf"], 2, "--threshold must be a finite number")


@case("usage")
def fail_above_nan(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp)
    return Scenario(["diff", path, path, "--fail-above", "nan"], 2, "--fail-above must be a finite number", None,
                    [path])


@case("usage")
def tolerance_infinite(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp)
    return Scenario(["diff", path, path, "--tolerance", "inf"], 2, "--tolerance must be a finite", None, [path])


@case("usage")
def collect_timeout_nan(tmp: Path) -> Scenario:
    return Scenario(["collect", TINY, "--timeout", "nan", "--out", tmp / "r"], 2, "--timeout must be a finite",
                    None, [], [tmp / "r"])


@case("usage")
def collect_device_unknown(tmp: Path) -> Scenario:
    return Scenario(["collect", TINY, "--device", "tpu", "--out", tmp / "r"], 2, "--device 'tpu'", None, [],
                    [tmp / "r"])


@case("usage")
def collect_no_nodes(tmp: Path) -> Scenario:
    return Scenario(["collect", TINY, "--nnodes", "0", "--out", tmp / "r"], 2, "at least 1 node", None, [],
                    [tmp / "r"])


# --- what reaches the terminal ------------------------------------------------------------------------------------

@case("terminal")
def kernel_names_with_escape_sequences_detect(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp, EVIL_NAMES, source=DDP_FILE)  # with communication: slowed kernels to name
    return Scenario(["detect", path, "--single-trace"], 0, "", None, [path], forbid=ESC, shows=SHOWN)


@case("terminal")
def kernel_names_with_escape_sequences_info(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp, EVIL_NAMES)
    return Scenario(["info", path], 0, "", None, [path], forbid=ESC, shows=SHOWN)


@case("terminal")
def kernel_names_with_escape_sequences_query(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp, EVIL_NAMES)
    return Scenario(["query", path, "SELECT DISTINCT name FROM kernels"], 0, "", None, [path], forbid=ESC,
                    shows=SHOWN)


@case("terminal")
def kernel_names_with_escape_sequences_csv(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp, EVIL_NAMES)
    return Scenario(["query", path, "SELECT DISTINCT name FROM kernels", "-f", "csv"], 0, "", None, [path],
                    forbid=ESC, shows=SHOWN)


@case("terminal")
def kernel_names_with_escape_sequences_diff(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp, EVIL_NAMES)
    return Scenario(["diff", path, path], 0, "", None, [path], forbid=ESC, shows=SHOWN[:6])  # names folded


@case("terminal")
def path_with_a_newline(tmp: Path) -> Scenario:
    missing = tmp / "two\nlines.sqlite"
    return Scenario(["detect", missing], 2, "no such file or directory", None)


@case("terminal")
def path_with_an_escape_sequence(tmp: Path) -> Scenario:
    missing = tmp / f"a{ESC}[2Jb.sqlite"
    return Scenario(["info", missing], 2, "no such file or directory", None, forbid=ESC)


# --- diff of unlike runs -----------------------------------------------------------------------------------------

@case("usage")
def diff_of_two_models(tmp: Path) -> Scenario:
    before, after = RUNS / "gpt2-cap2-inrun-nsys", RUNS / "resnet50-inrun-nsys"
    return Scenario(["diff", before, after], 0, "pairs with BEFORE's kernels", None,
                    [*run_traces(before), *run_traces(after)])


# --- whole numbers past what any column holds --------------------------------------------------------------------

HUGE = "99999999999999999999"


@case("usage")
def detect_top_past_64_bits(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp)
    return Scenario(["detect", path, "--top", HUGE], 2, f"--top {HUGE}: out of range", None, [path])


@case("usage")
def query_limit_past_64_bits(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp)
    return Scenario(["query", path, "SELECT 1", "--limit", HUGE], 2, f"--limit {HUGE}: out of range", None, [path])


@case("usage")
def diff_top_past_64_bits(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp)
    return Scenario(["diff", path, path, "--top", HUGE], 2, f"--top {HUGE}: out of range", None, [path])


@case("usage")
def ranks_steps_past_64_bits(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp)
    return Scenario(["ranks", path, "--steps", f"-{HUGE}"], 2, "--steps", None, [path])


@case("usage")
def whatif_threshold_nan(tmp: Path) -> Scenario:
    return Scenario(["whatif", "--threshold", "nan"], 2, "--threshold must be a finite number")


@case("usage")
def whatif_steps_zero(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp)
    return Scenario(["whatif", path, "--steps", "0"], 2, "--steps", None, [path])
