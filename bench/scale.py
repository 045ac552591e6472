"""`detect` at scale: wall time and peak memory on real traces made millions of kernels long, side by side
with a bare scan of the same kernel table.

    python bench/scale.py                       # 1.9 M kernels (about 5 min on 2 cores)
    python bench/scale.py --sizes 1.9 10        # and 10 M (needs several GB of disk in the temp folder)
    python bench/scale.py --hta /path/to/python # + HTA 0.5.0 (installed in that interpreter) on Kineto

The shipped traces (``datasets/``) are repeated with time shifts (``bench/scaled.py``) into a temp folder:
the two-rank GPT-2 DDP run (single-trace labels: ``detector``) and its isolated run (``baseline``), the run
with isolated steps (``inrun``), and the torch.profiler run (Kineto). Every command runs in a fresh process;
its wall time and peak resident memory (``wait4``) are printed, and each time as a multiple of the bare scan:
connect, ATTACH, read every column of the kernel table into Arrow (the floor any DuckDB reader pays; the
better of two runs). The traces are read once before, so that no command pays the disk.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scaled import scale_kineto, scale_nsys

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "datasets"
RUNS = {  # label source → (rank files of one run, isolated run files or None)
    "detector": (sorted((DATA / "default/gpt2-nsys/traces").glob("*.sqlite")), None),
    "baseline": (sorted((DATA / "default/gpt2-nsys/traces").glob("*.sqlite")),
                 sorted((DATA / "default/gpt2-single-nsys/traces").glob("*.sqlite"))),
    "inrun": (sorted((DATA / "inrun/gpt2-inrun-nsys/traces").glob("*.sqlite")), None),
}
KINETO = sorted((DATA / "runs/gpt2-torch/traces").glob("*.json.gz"))
BARE = """
import sys
from traceql.model import engine
con = engine.connect()
for i, path in enumerate(sys.argv[1:]):
    con.execute(f"ATTACH {engine.sql_literal(path)} AS f{i} (TYPE SQLITE, READ_ONLY)")
    con.execute(f"SELECT * FROM f{i}.CUPTI_ACTIVITY_KIND_KERNEL").fetch_arrow_table()
"""
HTA = """
import logging, sys, warnings
warnings.filterwarnings("ignore"); logging.disable(logging.CRITICAL)
from hta.trace_analysis import TraceAnalysis
TraceAnalysis(trace_dir=sys.argv[1]).get_comm_comp_overlap(visualize=False)
"""


def measure(cmd: list[str]) -> tuple[float, float]:
    """Run ``cmd`` in a fresh process: its wall seconds and peak resident memory (MiB); exit if it fails."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, cwd=ROOT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        if os.waitstatus_to_exitcode(status) != 0:
            err.seek(0)
            sys.exit(f"failed: {' '.join(cmd)}\n{err.read().decode()[-2000:]}")
    return wall, usage.ru_maxrss / 1024


def kernels_per_copy(files: list[Path]) -> int:
    import sqlite3

    total = 0
    for f in files:
        with sqlite3.connect(f"file:{f}?mode=ro", uri=True) as con:
            total += con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    return total


def build(files: list[Path], folder: Path, copies: int) -> list[Path]:
    """The scaled copies of ``files`` in ``folder`` (made once: a finished copy is reused)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for f in files:
        dst = folder / f.name
        if not dst.exists():
            part = dst.with_name(dst.name + ".part")
            scale_nsys(f, part, copies)
            part.rename(dst)
        out.append(dst)
    return out


def warm(paths: list[Path]) -> None:
    """Read the files once, so that every command finds them in the page cache (none pays the disk)."""
    for p in paths:
        with p.open("rb") as fh:
            while fh.read(1 << 24):
                pass


def row(name: str, wall: float, peak: float, bare: float | None) -> None:
    ratio = f"{wall / bare:8.2f}x" if bare else " " * 9
    print(f"{name:34s} {wall:9.2f} {peak:10.0f} {ratio}", flush=True)


def nsys_size(millions: float, tmp: Path) -> None:
    traceql = [sys.executable, "-m", "traceql"]
    per_copy = kernels_per_copy(RUNS["detector"][0])
    copies = max(1, round(millions * 1e6 / per_copy))
    print(f"\n{copies * per_copy:,} kernels: the 2-rank GPT-2 run x {copies} "
          f"(built in {tmp})", flush=True)
    print(f"{'':34s} {'wall s':>9s} {'peak MiB':>10s} {'x bare':>9s}")
    runs = {}
    t0 = time.perf_counter()
    for source, (files, iso) in RUNS.items():
        n = copies if source != "inrun" else max(1, round(copies * per_copy / kernels_per_copy(files)))
        runs[source] = (build(files, tmp / f"{files[0].parents[1].name}-x{n}", n),  # one build per run folder
                        build(iso, tmp / f"{iso[0].parents[1].name}-x{min(n, 20)}", min(n, 20)) if iso else None)
    print(f"{'(building the traces)':34s} {time.perf_counter() - t0:9.2f}", flush=True)
    main = runs["detector"][0]
    warm([p for files, iso in runs.values() for p in [*files, *(iso or [])]])
    bare, peak = min(measure([sys.executable, "-c", BARE, *map(str, main)]) for _ in range(2))
    row("bare scan of the kernel table", bare, peak, None)
    row("traceql info", *measure([*traceql, "info", str(main[0].parent)]), bare)
    for source, (files, iso) in runs.items():
        args = [str(files[0].parent)] + (["--baseline", str(iso[0].parent)] if iso else [])
        row(f"traceql detect ({source})", *measure([*traceql, "detect", *args]), bare)


def kineto(copies: int, tmp: Path, hta: str | None) -> None:
    folder = tmp / f"kineto-{copies}"
    folder.mkdir(parents=True, exist_ok=True)
    for f in KINETO:
        dst = folder / f.name.removesuffix(".gz")
        if not dst.exists():
            part = dst.with_name(dst.name + ".part")
            scale_kineto(f, part, copies)
            part.rename(dst)
    warm(sorted(folder.iterdir()))
    mb = sum(p.stat().st_size for p in folder.iterdir()) / 2**20
    print(f"\nKineto: the 2-rank torch.profiler run x {copies} ({mb:,.0f} MiB of JSON)")
    print(f"{'':34s} {'wall s':>9s} {'peak MiB':>10s} {'x HTA':>9s}")
    hta_wall = None
    if hta:
        hta_wall, peak = measure([hta, "-c", HTA, str(folder)])
        row("HTA 0.5.0 parse + overlap", hta_wall, peak, None)
    for cmd in (["info"], ["detect"]):
        wall, peak = measure([sys.executable, "-m", "traceql", *cmd, str(folder)])
        ratio = f"{hta_wall / wall:8.2f}x" if hta_wall else ""
        print(f"{'traceql ' + ' '.join(cmd):34s} {wall:9.2f} {peak:10.0f} {ratio}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=float, nargs="+", default=[1.9], help="millions of kernels (default 1.9)")
    ap.add_argument("--kineto-copies", type=int, default=13, help="repeats of the Kineto run (0: skip; 13: 2 x 141 MB)")
    ap.add_argument("--hta", help="a Python interpreter with holistictraceanalysis 0.5.0 installed")
    ap.add_argument("--keep", type=Path, help="build (and reuse) the traces in this folder")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="traceql-scale-")) if args.keep is None else args.keep
    try:
        for size in args.sizes:
            nsys_size(size, tmp)
        if args.kineto_copies:
            kineto(args.kineto_copies, tmp, args.hta)
    finally:
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
