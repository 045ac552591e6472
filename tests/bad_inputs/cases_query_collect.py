"""Results a query cannot show as they are, collections asked to start what no machine runs, profile folders given
twice or as their own output, searches and addresses that would never end, baselines that are no timeline."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.bad_inputs.scenario import NCU_DETAILS, Scenario, case, sqlite_copy
from tests.paths import RUNS, TINY

PROFILES = TINY.parent / "profiles" / "gpt2"

# --- query results: endless, huge, nested, binary, of types polars lacks -----------------------------------------


def query(tmp: Path, sql: str, *more: object, shows: str) -> Scenario:
    """``sql`` over a copy of the isolated run's export: shown (exit 0) as ``shows`` says."""
    path = sqlite_copy(tmp)
    return Scenario(["query", path, sql, *more], 0, "", None, [path], timeout=60, shows=shows)


@case("query")
def table_of_an_endless_result(tmp: Path) -> Scenario:
    """A table shows 5 rows: the other hundred billion are never computed."""
    return query(tmp, "SELECT * FROM range(100000000000)", "--limit", "5",
                 shows="    4\n… more rows (use --format csv/json/parquet or --output for all)\n")


@case("query")
def table_of_a_hundred_megabyte_value(tmp: Path) -> Scenario:
    return query(tmp, "SELECT repeat('x', 100000000) AS big", shows="more characters: --format csv or json")


@case("query")
def csv_of_lists_and_structs(tmp: Path) -> Scenario:
    return query(tmp, "SELECT [1, 2] AS l, {'a': [3]} AS s, list(name) AS names FROM kernels", "-f", "csv",
                 shows='l,s,names\n"[1, 2]","{""a"": [3]}","[""')


@case("query")
def json_of_bytes_in_a_list(tmp: Path) -> Scenario:
    return query(tmp, "SELECT ['x'::BLOB] AS b, 'y'::BLOB AS c", "-f", "json",
                 shows='[{"b": ["78"], "c": "79"}]')  # the bytes in hex


@case("query")
def table_of_intervals_and_bits(tmp: Path) -> Scenario:
    return query(tmp, "SELECT INTERVAL 3 DAY AS i, [INTERVAL 1 HOUR] AS l, BITSTRING '0101' AS b, "
                      "union_value(k := 1) AS u", shows="3 days  ['01:00:00']  0101  1\n")


@case("query")
def table_of_engine_settings(tmp: Path) -> Scenario:
    return query(tmp, "SELECT * FROM duckdb_settings()", shows="-- row 1 --\nname         ")  # as records


@case("query")
def output_with_no_format_suffix(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp)
    return Scenario(["query", path, "SELECT 1", "--output", tmp / "result.txt"], 2,
                    "give a .parquet, .csv or .json file", tmp / "result.txt", [path], [tmp / "result.txt"])


# --- collections no machine runs, options the profiler would only refuse once the ranks ran ---------------------


def collect(tmp: Path, *args: object, phrase: str, code: int = 2) -> Scenario:
    return Scenario(["collect", TINY, "--device", "cpu", *args, "--out", tmp / "run"], code, phrase, None, [],
                    [tmp / "run"])


@case("collect")
def world_of_a_hundred_billion_ranks(tmp: Path) -> Scenario:
    return collect(tmp, "--set", "world_size=100000000000", phrase="world_size must be an integer of at least 1 and "
                   "at most 1,048,576")


@case("collect")
def more_cpu_ranks_than_a_node_runs(tmp: Path) -> Scenario:
    return collect(tmp, "--set", "world_size=100000", phrase="CPU ranks on this node; it runs at most", code=5)


@case("collect")
def cap_of_nan(tmp: Path) -> Scenario:
    return collect(tmp, "--set", "cap_size=NaN", phrase="cap_size must be a finite number above 0, got NaN")


@case("collect")
def straggler_sleeping_nan_ms(tmp: Path) -> Scenario:
    return collect(tmp, "--set", 'straggler={"rank": 0, "steps": [1], "sleep_ms": NaN}',
                   phrase="straggler sleep_ms must be a finite number of ms above 0, got NaN")


@case("collect")
def set_without_a_key(tmp: Path) -> Scenario:
    return collect(tmp, "--set", "=2", phrase="expected KEY=VALUE")


@case("collect")
def torch_schedule_waiting_minus_one(tmp: Path) -> Scenario:
    return collect(tmp, "--profiler", "torch", "--torch-wait", "-1", phrase="--torch-wait must be 0 or more, got -1")


@case("collect")
def ncu_launch_count_zero(tmp: Path) -> Scenario:
    return collect(tmp, "--profiler", "ncu", "--ncu-launch-count", "0", phrase="--ncu-launch-count must be 1 or more")


@case("collect")
def rendezvous_without_a_port(tmp: Path) -> Scenario:
    return collect(tmp, "--nnodes", "2", "--rdzv-endpoint", "node0:abc", phrase="give HOST:PORT")


@case("collect")
def nsys_on_cpu(tmp: Path) -> Scenario:
    return collect(tmp, "--profiler", "nsys", phrase="--device cpu runs none")


def env_ranks(tmp: Path, phrase: str, **env: str) -> Scenario:
    """``--launcher env`` with the rank variables mpirun/srun would set as ``env``: refused before anything is
    made or launched, the input folder as it was."""
    scenario = collect(tmp, "--launcher", "env", phrase=phrase)
    scenario.inputs, scenario.env = sorted(p for p in TINY.iterdir() if p.is_file()), env
    return scenario


@case("collect")
def world_of_minus_one_ranks(tmp: Path) -> Scenario:
    return collect(tmp, "--set", "world_size=-1", phrase="world_size must be an integer of at least 1 and at most "
                   "1,048,576, got -1")


@case("collect")
def launcher_env_world_of_zero(tmp: Path) -> Scenario:
    return env_ranks(tmp, "WORLD_SIZE='0' in the launcher's environment: the number of ranks started must be an "
                     "integer of at least 1", RANK="0", WORLD_SIZE="0", LOCAL_RANK="0")


@case("collect")
def launcher_env_world_negative(tmp: Path) -> Scenario:
    return env_ranks(tmp, "SLURM_NTASKS='-2' in the launcher's environment: the number of ranks started must be "
                     "an integer of at least 1", SLURM_PROCID="0", SLURM_NTASKS="-2")


@case("collect")
def launcher_env_rank_past_the_world(tmp: Path) -> Scenario:
    return env_ranks(tmp, "OMPI_COMM_WORLD_RANK=5 in the launcher's environment is not a rank of the run (0..1, "
                     "world_size 2)", OMPI_COMM_WORLD_RANK="5", OMPI_COMM_WORLD_SIZE="2")


# --- profile folders and runs given twice, or as their own output ------------------------------------------------


def _profiles(tmp: Path) -> Path:
    return Path(shutil.copytree(PROFILES, tmp / "profiles"))


@case("profile")
def merge_a_folder_twice(tmp: Path) -> Scenario:
    folder = _profiles(tmp)
    return Scenario(["profile", "merge", folder, folder, "--out", tmp / "m"], 2, "given twice", folder,
                    sorted(folder.iterdir()), [tmp / "m"])


@case("profile")
def merge_into_its_own_folder(tmp: Path) -> Scenario:
    folder = _profiles(tmp)
    return Scenario(["profile", "merge", folder, "--out", folder], 2, "is one of the input folders", folder,
                    sorted(folder.iterdir()))


@case("profile")
def buckets_of_one_run_twice(tmp: Path) -> Scenario:
    run = Path(shutil.copytree(RUNS / "gpt2-b16-cap2-none", tmp / "run"))
    return Scenario(["profile", "buckets", run, tmp / "." / "run", "--out", tmp / "b"], 2, "given twice", None,
                    [run / "manifest.json"], [tmp / "b"])


@case("profile")
def compute_batch_past_any_device(tmp: Path) -> Scenario:
    return Scenario(["profile", "compute", TINY, "--batches", "1,99999999999999999999", "--out", tmp / "p"], 2,
                    "--batches must be batch sizes from 1 to 2,147,483,647", None, [], [tmp / "p"])


# --- searches and addresses that would never end, baselines that are no timeline --------------------------------


@case("profile")
def solve_with_limits_past_any_search(tmp: Path) -> Scenario:
    folder = _profiles(tmp)
    cluster = TINY.parent / "clusters" / "h200-h100.json"
    return Scenario(["solve", folder, "-n", 2**63 - 1, "-c", cluster, "--max-accumulation", 2**63 - 1], 2,
                    "--max-accumulation must be an integer of at least 1 and at most 1,024", None,
                    sorted(folder.iterdir()), timeout=30)


@case("parallel")
def scheduler_host_name_too_long(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp)
    return Scenario(["detect", path, "--scheduler", f"tcp://{'a' * 300}:8786"], 2, "not a host name", None, [path],
                    timeout=30)


@case("usage")
def baseline_of_ncu_metrics(tmp: Path) -> Scenario:
    path = sqlite_copy(tmp)
    metrics = tmp / "metrics.csv"
    shutil.copyfile(NCU_DETAILS, metrics)
    return Scenario(["report", path, "--baseline", metrics, "-o", tmp / "r.html"], 2,
                    "Nsight Compute metrics are not an isolated run", metrics, [path, metrics], [tmp / "r.html"])
