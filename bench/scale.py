"""`detect` at scale: wall time and peak memory on real traces made millions of kernels long, side by side
with a bare scan of the same kernel tables.

    python bench/scale.py                       # 32 ranks (11.7 M kernels) and 1.9 M (about 5 min on 2 cores)
    python bench/scale.py --sizes 1.9 10 --one  # and 10 M, + one export of each size (several GB of disk)
    python bench/scale.py --hta /path/to/python # + HTA 0.5.0 (installed in that interpreter) on Kineto
    python bench/scale.py --ranks 0 --sizes --kineto-copies 13 39 --hta PY --whatif   # Kineto alone, 2 sizes
    python bench/scale.py --ranks 0 --sizes 0.5 1 --whatif   # `whatif` beside `detect` on the same run
    python bench/scale.py --sizes 0.1 1 1.9 --cache-only --kineto-copies   # first and later commands
    python bench/scale.py --ranks 0 --cache-only --kineto-copies --nsys-ai nsys-ai   # + nsys-ai, 1.9 M

The shipped traces (``datasets/``) are repeated with time shifts (``bench/scaled.py``) into a temp folder:
the two-rank GPT-2 DDP run (single-trace labels: ``detector``) and its isolated run (``baseline``), the run
with isolated steps (``inrun``), and the torch.profiler run (Kineto). The many-rank run is that two-rank
run made longer, its two exports linked (or copied) under the names of ``--ranks`` ranks. ``--one`` adds one
export of each size: rank 0 alone, made as long as the whole run.

Each run is first read by `detect` with no columnar copy of its exports (``cold``: it makes them, in a cache
folder of the bench's own, and keeps its result), then again (served its result), then by every reading
command with the copies, computing (``warm``); `ranks` and `whatif` keeping their replay and served it
(``kept``; the first `ranks` after `detect` and `detect` after `ranks` start from the labels kept); and
`detect --no-cache`. The rows after those find the copies made; every command but those that
say ``kept`` computes its answer (``TRACEQL_NO_RESULT_CACHE=1``). Every command runs in a fresh process
(``detect`` also with ``--no-causes``: no replay); its wall time and peak resident memory (``wait4``) are
printed, and each time as a multiple of two bare scans of the same kernel tables (connect, ATTACH, read into
Arrow; the better of two runs): every column (``x all``: the floor any DuckDB reader pays), and only the
columns `detect` reads (``x cols``). The traces are read once before, so that no command pays the disk.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from nsysai import nsys_ai_rows
from scaled import kineto_period, link_ranks, run_period, scale_kineto, scale_nsys
from timing import ROOT, header, measure, row, scans

DATA = ROOT / "datasets"
RUNS = {  # label source → (rank files of one run, isolated run files or None)
    "detector": (sorted((DATA / "default/gpt2-nsys/traces").glob("*.sqlite")), None),
    "baseline": (sorted((DATA / "default/gpt2-nsys/traces").glob("*.sqlite")),
                 sorted((DATA / "default/gpt2-single-nsys/traces").glob("*.sqlite"))),
    "inrun": (sorted((DATA / "inrun/gpt2-inrun-nsys/traces").glob("*.sqlite")), None),
}
KINETO = sorted((DATA / "runs/gpt2-torch/traces").glob("*.json.gz"))
HTA = """
import logging, sys, warnings
warnings.filterwarnings("ignore"); logging.disable(logging.CRITICAL)
from hta.trace_analysis import TraceAnalysis
TraceAnalysis(trace_dir=sys.argv[1]).get_comm_comp_overlap(visualize=False)
"""


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
    out, period = [], run_period(files)
    for f in files:
        dst = folder / f.name
        if not dst.exists():
            part = dst.with_name(dst.name + ".part")
            scale_nsys(f, part, copies, period)
            part.rename(dst)
        out.append(dst)
    return out


def warm(paths: list[Path]) -> None:
    """Read the files once, so that every command finds them in the page cache (none pays the disk)."""
    for p in paths:
        with p.open("rb") as fh:
            while fh.read(1 << 24):
                pass


TRACEQL = [sys.executable, "-m", "traceql"]
CACHE_ONLY = "--cache-only" in sys.argv  # the cold / warm / --no-cache rows alone
NSYS_AI: str | None = None  # nsys-ai's command, where given (``--nsys-ai``)


def cache_rows(args: list[str], bare: tuple[float, float], cache: Path) -> None:
    """The cache (``traceql cache``): the first `detect` (no copy yet: it makes them and keeps its result and
    labels), the same again (its result served), then each reading command computing with the copies there
    (``warm``), the first `ranks` after that `detect` (its labels and replay served) keeping its result and
    `whatif` and `ranks` served it (``kept``), `detect` again without its result (served the labels and its
    replay), `ranks` first of all (every result gone, the copies kept) and `detect` after it (served the labels
    and the replay that `ranks` made for it), and `detect --no-cache` (every export read itself, nothing
    kept)."""
    shutil.rmtree(cache, ignore_errors=True)
    row("detect, cold (copies made)", *measure([*TRACEQL, "detect", *args], kept=True), bare)
    row("detect, again (its result kept)", *measure([*TRACEQL, "detect", *args], kept=True), bare)
    for cmd in ("detect", "ranks", "whatif", "collectives"):
        row(f"{cmd}, warm", *measure([*TRACEQL, cmd, *args]), bare)
    row("ranks, after detect, kept", *measure([*TRACEQL, "ranks", *args], kept=True), bare)
    row("whatif, after ranks, kept", *measure([*TRACEQL, "whatif", *args], kept=True), bare)
    row("ranks, again (its replay kept)", *measure([*TRACEQL, "ranks", *args], kept=True), bare)
    for entry in cache.glob("result-*"):  # `detect`'s own result gone: it starts from the labels kept
        if '"source": "detect:' in (entry / "manifest.json").read_text():
            shutil.rmtree(entry)
    row("detect, after ranks, kept", *measure([*TRACEQL, "detect", *args], kept=True), bare)
    for entry in cache.glob("result-*"):  # every result gone, the copies kept: `ranks` first, `detect` after it
        shutil.rmtree(entry)
    row("ranks, first (no result kept)", *measure([*TRACEQL, "ranks", *args], kept=True), bare)
    row("detect, after a first ranks", *measure([*TRACEQL, "detect", *args], kept=True), bare)
    row("detect --no-cache", *measure([*TRACEQL, "--no-cache", "detect", *args]), bare)
    files = {(p.stat().st_dev, p.stat().st_ino): p.stat().st_size for p in cache.rglob("*") if p.is_file()}
    print(f"{'  the cache':32s} {sum(files.values()) / 2**20:8.1f} MiB")  # a file linked twice: once


def nsys_size(millions: float, tmp: Path, one: bool, whatif: bool = False) -> None:
    per_copy = kernels_per_copy(RUNS["detector"][0])
    copies = max(1, round(millions * 1e6 / per_copy))
    runs = {}
    t0 = time.perf_counter()
    for source, (files, iso) in RUNS.items():
        n = copies if source != "inrun" else max(1, round(copies * per_copy / kernels_per_copy(files)))
        runs[source] = (build(files, tmp / f"{files[0].parents[1].name}-x{n}", n),  # one build per run folder
                        build(iso, tmp / f"{iso[0].parents[1].name}-x{min(n, 20)}", min(n, 20)) if iso else None)
    rank0 = RUNS["detector"][0][:1]
    single = build(rank0, tmp / f"one-x{2 * copies}", 2 * copies) if one else []
    header(f"{copies * per_copy:,} kernels: the 2-rank GPT-2 run x {copies} (built in "
           f"{time.perf_counter() - t0:.0f} s)")
    main = runs["detector"][0]
    warm([p for files, iso in runs.values() for p in [*files, *(iso or [])]])
    bare = scans(main)
    cache_rows([str(main[0].parent)], bare, tmp / "cache")
    nsys_ai_rows(NSYS_AI, main[0])
    if CACHE_ONLY:
        return
    row("traceql info", *measure([*TRACEQL, "info", str(main[0].parent)]), bare)
    for source, (files, iso) in runs.items():
        args = [str(files[0].parent)] + (["--baseline", str(iso[0].parent)] if iso else [])
        detect_row = measure([*TRACEQL, "detect", *args])
        row(f"traceql detect ({source})", *detect_row, bare)
        row(f"  --no-causes ({source})", *measure([*TRACEQL, "detect", *args, "--no-causes"]), bare)
        if whatif and source == "detector":
            wall, peak = measure([*TRACEQL, "whatif", *args])
            row("traceql whatif", wall, peak, bare)
            print(f"{'  whatif / detect':32s} {wall / detect_row[0]:8.2f}x", flush=True)
    if single:
        warm(single)
        header(f"one export: rank 0 x {2 * copies} ({kernels_per_copy(single):,} kernels)")
        single_bare = scans(single)
        cache_rows([str(single[0])], single_bare, tmp / "cache")


def ranks(count: int, millions: float, tmp: Path) -> None:
    """A run of ``count`` rank exports, ``millions`` of kernels in all: the 2-rank run made longer, its exports
    linked under the names of ``count`` ranks."""
    files = RUNS["detector"][0]
    copies = max(1, round(millions * 1e6 / (count / 2) / kernels_per_copy(files)))
    t0 = time.perf_counter()
    base = build(files, tmp / f"ranks-base-x{copies}", copies)
    folder = tmp / f"ranks-{count}-x{copies}"
    run = link_ranks(base, folder, count)
    total = kernels_per_copy(base) * count // 2
    header(f"{count} ranks, {total:,} kernels: the 2-rank GPT-2 run x {copies}, linked as {count} (built in "
           f"{time.perf_counter() - t0:.0f} s)")
    warm(base)
    bare = scans(run)
    cache_rows([str(folder)], bare, tmp / "cache")
    nsys_ai_rows(NSYS_AI, base[0])
    if CACHE_ONLY:
        return
    row("traceql info", *measure([*TRACEQL, "info", str(folder)]), bare)
    row("traceql detect", *measure([*TRACEQL, "detect", str(folder)]), bare)
    row("  --no-causes", *measure([*TRACEQL, "detect", str(folder), "--no-causes"]), bare)


def kineto(copies: int, tmp: Path, hta: str | None, whatif: bool = False) -> None:
    folder = tmp / f"kineto-{copies}"
    folder.mkdir(parents=True, exist_ok=True)
    period = max(kineto_period(f) for f in KINETO)  # one for both ranks: they stay together
    for f in KINETO:
        dst = folder / f.name.removesuffix(".gz")
        if not dst.exists():
            part = dst.with_name(dst.name + ".part")
            scale_kineto(f, part, copies, period)
            part.rename(dst)
    warm(sorted(folder.iterdir()))
    mb = sum(p.stat().st_size for p in folder.iterdir()) / 2**20
    print(f"\nKineto: the 2-rank torch.profiler run x {copies} ({mb:,.0f} MiB of JSON)")
    print(f"{'':32s} {'wall s':>8s} {'peak MiB':>9s} {'x HTA':>9s}")
    hta_wall = None
    if hta:
        hta_wall, peak = measure([hta, "-c", HTA, str(folder)])
        row("HTA 0.5.0 parse + overlap", hta_wall, peak)
    walls = {}
    for cmd in ("info", "detect", *(("whatif",) if whatif else ())):
        wall, peak = measure([*TRACEQL, cmd, str(folder)])
        walls[cmd] = wall
        ratio = f"{hta_wall / wall:8.2f}x" if hta_wall else ""
        print(f"{'traceql ' + cmd:32s} {wall:8.2f} {peak:9.0f} {ratio}", flush=True)
    if whatif:
        print(f"{'  whatif / detect':32s} {walls['whatif'] / walls['detect']:8.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=float, nargs="*", default=[1.9], help="millions of kernels (default 1.9)")
    ap.add_argument("--one", action="store_true", help="also one export of each size (rank 0 made longer)")
    ap.add_argument("--ranks", type=int, default=32, help="ranks of the many-rank run (default 32; 0: skip)")
    ap.add_argument("--rank-millions", type=float, default=11.7, help="its millions of kernels (default 11.7)")
    ap.add_argument("--kineto-copies", type=int, nargs="*", default=[13],
                    help="repeats of the Kineto run, one sitting each (none or 0: skip; 13: 2 x 112 MiB)")
    ap.add_argument("--hta", help="a Python interpreter with holistictraceanalysis 0.5.0 installed")
    ap.add_argument("--nsys-ai", help="nsys-ai's command (pip install nsys-ai): its diagnosis and views beside")
    ap.add_argument("--keep", type=Path, help="build (and reuse) the traces in this folder")
    ap.add_argument("--whatif", action="store_true", help="also `traceql whatif` of the detector's run, x detect")
    ap.add_argument("--cache-only", action="store_true", help="only the cold, warm and --no-cache rows")
    args = ap.parse_args()
    global NSYS_AI
    NSYS_AI = args.nsys_ai
    tmp = Path(tempfile.mkdtemp(prefix="traceql-scale-")) if args.keep is None else args.keep
    os.environ["TRACEQL_CACHE_DIR"] = str(tmp / "cache")  # the bench's own: cold and warm are its to set
    os.environ["TRACEQL_NO_RESULT_CACHE"] = "1"  # every command computes, but the rows that say "kept"
    try:
        if args.ranks:
            ranks(args.ranks, args.rank_millions, tmp)
        for size in args.sizes:
            nsys_size(size, tmp, args.one, args.whatif)
        for copies in args.kineto_copies:
            if copies:
                kineto(copies, tmp, args.hta, args.whatif)
    finally:
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
