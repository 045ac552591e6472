"""What the scale benches share: a command timed in a fresh process (wall seconds, peak memory), a row of
figures as multiples of the bare scans, and those scans of an export's kernel table."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BARE = """
import sys
from traceql.model import engine
con = engine.connect()
for i, path in enumerate(sys.argv[2:]):
    con.execute(f"ATTACH {engine.sql_literal(path)} AS f{i} (TYPE SQLITE, READ_ONLY)")
    con.execute(f"SELECT {sys.argv[1]} FROM f{i}.CUPTI_ACTIVITY_KIND_KERNEL").fetch_arrow_table()
"""
# the kernel columns `detect` reads (traceql/sources/nsys_kernels.py)
COLUMNS = ", ".join(["globalPid", "deviceId", "streamId", "start", '"end"', "shortName", "demangledName",
                     "gridX", "gridY", "gridZ", "blockX", "blockY", "blockZ", "registersPerThread",
                     "staticSharedMemory", "dynamicSharedMemory", "correlationId"])


def measure(cmd: list[str], kept: bool = False) -> tuple[float, float]:
    """Run ``cmd`` in a fresh process (``kept``: results kept and served, else computed): its wall seconds and
    peak resident memory (MiB); exit if it fails."""
    env = {k: v for k, v in os.environ.items() if k != "TRACEQL_NO_RESULT_CACHE" or not kept}
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, cwd=ROOT, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        if os.waitstatus_to_exitcode(status) != 0:
            err.seek(0)
            sys.exit(f"failed: {' '.join(cmd)}\n{err.read().decode()[-2000:]}")
    return wall, usage.ru_maxrss / 1024


def row(name: str, wall: float, peak: float, bare: tuple[float, float] | None = None) -> None:
    ratios = f"{wall / bare[0]:8.2f}x {wall / bare[1]:8.2f}x" if bare else ""
    print(f"{name:32s} {wall:8.2f} {peak:9.0f} {ratios}", flush=True)


def header(title: str) -> None:
    print(f"\n{title}", flush=True)
    print(f"{'':32s} {'wall s':>8s} {'peak MiB':>9s} {'x all':>9s} {'x cols':>9s}")


def scans(files: list[Path]) -> tuple[float, float]:
    """The two bare scans of the kernel tables of ``files`` (the better of two runs each), printed."""
    out = []
    for name, columns in (("every column", "*"), ("the columns detect reads", COLUMNS)):
        wall, peak = min(measure([sys.executable, "-c", BARE, columns, *map(str, files)]) for _ in range(2))
        row(f"scan: {name}", wall, peak)
        out.append(wall)
    return out[0], out[1]
