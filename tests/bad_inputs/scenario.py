"""The corpus's frame: a case, its registry and the helpers that make bad files from the shipped traces.

Each case builds its files in a temporary folder and returns the command to run and what must happen: the
exit code, a phrase of the one ``error:`` line (or of a warning, for data that is still usable), the file
that line must name, and the inputs whose bytes must not change.
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
    phrase: str
    names: Path | None = None  # the file the error line must name
    inputs: list[Path] = field(default_factory=list)  # their bytes, and their folders' listings, stay the same
    absent: list[Path] = field(default_factory=list)  # files that must not exist afterwards
    timeout: int = 120  # seconds before the case counts as a hang
    forbid: str | None = None  # text that must appear nowhere in stdout or stderr (a control character)


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


def detect(path: Path, code: int, phrase: str, *more: object, names: bool = True) -> Scenario:
    return Scenario(["detect", path, *more], code, phrase, path if names else None, [path])


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
