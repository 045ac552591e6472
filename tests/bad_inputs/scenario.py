"""The corpus's frame: a case, its registry and the helpers that make bad files from the shipped traces.

Each case builds its files in a temporary folder and returns the command to run and what must happen: the
exit code, a phrase of the one ``error:`` line (or of a warning, for data that is still usable: with the table
and the count of rows concerned, counted here with sqlite3 or in the JSON), the file that line must name, what
the output shows of an odd input that is read as it is, and the inputs whose bytes must not change.
"""

from __future__ import annotations

import functools
import gzip
import json
import shutil
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.paths import ROOT, RUNS, SINGLE_FILE

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
    phrase: str  # of the error line; with exit 0, of a warning line ("" where nothing is to be said: see shows)
    names: Path | None = None  # the file the error (or warning) line must name
    inputs: list[Path] = field(default_factory=list)  # their bytes, and their folders' listings, stay the same
    absent: list[Path] = field(default_factory=list)  # files that must not exist afterwards
    timeout: int = 120  # seconds before the case counts as a hang
    forbid: str | None = None  # text that must appear nowhere in stdout or stderr (a control character)
    shows: str | None = None  # text stdout must hold: what a command shows of an odd input it reads as it is
    env: dict[str, str] = field(default_factory=dict)  # environment variables the command runs with


CASES: dict[str, Callable[[Path], Scenario]] = {}


def case(group: str) -> Callable:
    def register(make: Callable[[Path], Scenario]) -> Callable[[Path], Scenario]:
        CASES[f"{group}-{make.__name__}"] = make
        return make
    return register


def named(group: str, name: str, make: Callable[[Path], Scenario]) -> None:
    """``make`` (a lambda, or one maker shared by a table of cases) registered as the case ``<group>-<name>``."""
    make.__name__ = name
    case(group)(make)


def sqlite_copy(tmp: Path, *statements: str, source: Path = SINGLE_FILE, name: str = "report.sqlite") -> Path:
    path = tmp / name
    shutil.copyfile(source, path)
    con = sqlite3.connect(path)
    for statement in statements:
        con.execute(statement)
    con.commit()
    con.close()
    return path


def sqlite_count(sql: str, source: Path = SINGLE_FILE) -> int:
    """``SELECT count(*) ...`` of the shipped export ``source``, with sqlite3: how many rows a case changes."""
    con = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    try:
        return con.execute(sql).fetchone()[0]
    finally:
        con.close()


def kernel_rows(where: str, source: Path = SINGLE_FILE) -> int:
    """How many kernel rows of ``source`` match ``where``."""
    return sqlite_count(f"SELECT count(*) FROM {KERNELS} WHERE {where}", source)


def compute_kernels(source: Path = SINGLE_FILE) -> int:
    """The compute (not NCCL) kernels of ``source``."""
    return sqlite_count(f"SELECT count(*) FROM {KERNELS} k JOIN StringIds s ON s.id = k.shortName "
                        "WHERE s.value NOT LIKE 'nccl%'", source)


def detect(path: Path, code: int, phrase: str, *more: object, names: bool = True, shows: str | None = None,
           forbid: str | None = None) -> Scenario:
    return Scenario(["detect", path, *more], code, phrase, path if names else None, [path], forbid=forbid,
                    shows=shows)


@functools.cache
def kineto_events() -> dict:
    return json.loads(gzip.decompress(KINETO.read_bytes()))


def kineto_copy(tmp: Path, change: Callable[[dict], dict | None] | None = None, *, top: dict | None = None,
                name: str = "rank0.json") -> Path:
    """The torch.profiler trace with each event passed through ``change`` (None drops it)."""
    data = kineto_events()
    events = [e for e in (change(dict(e)) if change else e for e in data["traceEvents"]) if e is not None]
    path = tmp / name
    path.write_text(json.dumps({**data, "traceEvents": events, **(top or {})}))
    return path


def kernels_only(change: Callable[[dict], dict | None]) -> Callable[[dict], dict | None]:
    return lambda e: change(e) if e.get("cat") == "kernel" else e


def kineto_kernels(pick: Callable[[dict], bool] = lambda e: True) -> int:
    """How many kernel events of the shipped torch.profiler trace ``pick`` selects, counted in its JSON."""
    return sum(1 for e in kineto_events()["traceEvents"] if e.get("cat") == "kernel" and pick(e))


def kineto_compute() -> str:
    """What detect's summary says of the shipped torch.profiler trace's compute kernels, all of them read."""
    return f"among {kineto_kernels(lambda e: not e['name'].lower().startswith('nccl')):,} compute kernels"
