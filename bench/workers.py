"""Time `dataset add` and `detect` over 8 large traces, one after another against `--workers 2`, side by side.

    python bench/workers.py [--copies 12] [--workers 2] [--repeat 1] [--keep DIR]
    python bench/workers.py --sweep 100            # 100 small traces, one of them corrupt, --workers 2
    python bench/workers.py --ranks 32 --workers 8 --cluster 4   # one run of 32 rank exports

The 8 traces are real exports made longer (``bench/scaled.py``: their steps repeated, shifted in time): the
four DDP runs of ../shared/datasets/h200-ddp/nsys and the embedded GPT-2 pair (``datasets/default``),
at a few lengths, so that no two are the same. Each command runs as a whole process (start-up, reading,
labelling, writing), serial and parallel in turn; the wall times, their ratio and whether both gave the
same result are printed. The sweep checks many small traces: its progress bar (on a terminal), the corrupt
trace reported as failed, the others added. ``--ranks`` times one run of many rank exports (the embedded
GPT-2 pair made longer, linked under the names of 32 ranks: ``bench/scaled.py``; needs nothing of the shared
corpus) labelled a rank at a time: serially, on ``--workers`` processes, and on a Dask LocalCluster of
``--cluster`` worker processes; every way must write the same rows.
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scaled import link_ranks, run_period, scale_nsys  # noqa: E402 - beside this script

ROOT = Path(__file__).resolve().parents[1]
NSYS = ROOT.parent / "shared" / "datasets" / "h200-ddp" / "nsys"
DEFAULT = ROOT / "datasets" / "default"
DDP = ("toy_ddp2_cap25", "toy_ddp2_cap2", "gpt2_ddp2_cap25", "gpt2_ddp2_cap2")


def make_traces(out: Path, copies: int) -> list[Path]:
    """8 distinct long traces: the 4 shared DDP exports at two lengths, the embedded pair at two more."""
    def scaled(src: Path, dst: Path, n: int) -> None:
        if not dst.exists():  # kept from an earlier run (--keep)
            scale_nsys(src, dst, n)

    traces = []
    for name, n in [*((d, copies) for d in DDP), ("toy_ddp2_cap2", copies + 4), ("gpt2_ddp2_cap25", copies + 4)]:
        traces.append(out / f"{name}_x{n}.sqlite")
        scaled(NSYS / f"{name}.sqlite", traces[-1], n)
    for n in (3 * copies, 3 * copies + 6):  # one run of two per-rank files, in a folder of its own
        traces.append(out / f"gpt2-nsys_x{n}")
        traces[-1].mkdir(exist_ok=True)
        for src in sorted((DEFAULT / "gpt2-nsys" / "traces").glob("*.sqlite")):
            scaled(src, traces[-1] / src.name, n)
    return traces


def timed(args: list[str]) -> tuple[float, float, subprocess.CompletedProcess]:
    """Wall seconds, CPU seconds (the command and its workers) and the finished command."""
    t0, c0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-m", "traceql", *args], cwd=ROOT, capture_output=True, text=True)
    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.perf_counter() - t0, c1.ru_utime - c0.ru_utime + c1.ru_stime - c0.ru_stime, done


def entries(root: Path) -> dict:
    meta = json.loads((root / "dataset.json").read_text())["entries"]
    return {k: {f: v for f, v in e.items() if f != "added"} for k, e in meta.items()}


def same_rows(a: Path, b: Path) -> bool:
    import polars as pl

    ea, eb = entries(a), entries(b)
    return ea == eb and all(pl.read_parquet(a / e["file"]).equals(pl.read_parquet(b / e["file"]))
                            for e in ea.values())


def compare(work: Path, traces: list[Path], workers: int, repeat: int) -> None:
    baselines = ["--baseline", str(NSYS / "toy_single.sqlite"), "--baseline", str(NSYS / "gpt2_single.sqlite"),
                 "--baseline", str(DEFAULT / "gpt2-single-nsys")]
    rows = []
    for what in ("dataset add", "detect"):
        serial, parallel, same, cores = [], [], True, {}
        for i in range(repeat):
            outs = []
            for extra in ([], ["--workers", str(workers)]):
                if what == "dataset add":
                    root = work / f"ds-{i}-{len(extra)}"
                    shutil.rmtree(root, ignore_errors=True)
                    seconds, cpu, done = timed(["dataset", "add", str(root), *map(str, traces), *baselines, *extra])
                    outs.append(root)
                else:
                    seconds, cpu, done = timed(["detect", *map(str, traces), "--format", "json", *extra])
                    outs.append(done.stdout)
                cores[bool(extra)] = cpu / seconds
                if done.returncode != 0:
                    sys.exit(f"{what} {' '.join(extra)} failed: {done.stderr.strip() or done.stdout[-500:]}")
                (parallel if extra else serial).append(seconds)
            same &= same_rows(*outs) if what == "dataset add" else outs[0] == outs[1]
        s, p = min(serial), min(parallel)
        rows.append((f"{what} (8 traces)", s, p, s / p, cores[False], cores[True], "yes" if same else "NO"))
    print(f"{'command':<22}{'serial s':>9}{f'--workers {workers} s':>15}{'ratio':>7}{'cores used':>13}  same")
    for name, s, p, ratio, c1, c2, same in rows:
        print(f"{name:<22}{s:>9.1f}{p:>15.1f}{ratio:>6.2f}x{c1:>7.1f} /{c2:>4.1f}  {same}")
    print("cores used: CPU time / wall time of the command and its workers, serial / parallel")


def sweep(work: Path, n: int, workers: int) -> None:
    """n small traces (copies of the embedded rank-0 export under their own names), one of them truncated."""
    src = next((DEFAULT / "gpt2-nsys" / "traces").glob("*rank0.sqlite"))
    traces = [work / f"sweep{i:03d}.sqlite" for i in range(n)]
    for t in traces:
        shutil.copyfile(src, t)
    bad = traces[n // 2]
    bad.write_bytes(bad.read_bytes()[: bad.stat().st_size // 2])  # an export whose copy did not finish
    for ds in ("sweep-ds", "sweep-serial"):  # a kept dataset would skip the entries it has
        shutil.rmtree(work / ds, ignore_errors=True)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "traceql", "dataset", "add", str(work / "sweep-serial"),
                    *map(str, traces)], cwd=ROOT, capture_output=True)
    serial = time.perf_counter() - t0
    args = [sys.executable, "-m", "traceql", "dataset", "add", str(work / "sweep-ds"), *map(str, traces),
            "--workers", str(workers)]
    t0 = time.perf_counter()
    master, slave = pty.openpty()  # a terminal for its stderr: the progress bar draws there
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=slave, text=True,
                            env={**os.environ, "COLUMNS": "80"})
    os.close(slave)
    drawn = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the other end closed: the command is done with its terminal
            break
        if not chunk:
            break
        drawn += chunk
    out = proc.communicate()[0]
    os.close(master)
    seconds = time.perf_counter() - t0
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", drawn.decode(errors="replace"))  # the terminal's codes
    frames = [f for f in text.replace("\r", "\n").split("\n") if "adding" in f]
    counts = sorted({int(m.group(1)) for f in frames if (m := re.search(rf" (\d+)/{n} ", f))})
    print(f"sweep: {n} traces, 1 truncated: one after another {serial:.1f} s; --workers {workers}: exit "
          f"{proc.returncode} in {seconds:.1f} s ({serial / seconds:.2f}x)")
    print(f"progress bar: {len(frames)} updates drawn on the terminal; last: "
          f"{frames[-1].strip()[:70] if frames else '(none)'}")
    print(f"progress counts drawn: {len(counts)} distinct, from {counts[0]}/{n} to {counts[-1]}/{n}" if counts
          else "progress: none drawn")
    for line in out.splitlines():
        if line.startswith(("failed:", f"{n - 1} added")) or "added, " in line:
            print(line)
    added = len(entries(work / "sweep-ds"))
    print(f"entries recorded: {added} (want {n - 1}); the failed one: {bad.name}")


def many_ranks(work: Path, count: int, copies: int, workers: int, cluster: int, rows_too: bool = True) -> None:
    """``detect`` of one run of ``count`` rank exports: serial, ``--workers``, and on a LocalCluster; each
    also with ``--out`` unless ``rows_too`` is off."""
    t0 = time.perf_counter()
    base = []
    sources = sorted((DEFAULT / "gpt2-nsys" / "traces").glob("*.sqlite"))
    period = run_period(sources)
    for src in sources:
        base.append(work / f"base-x{copies}" / src.name)
        base[-1].parent.mkdir(exist_ok=True)
        if not base[-1].exists():
            scale_nsys(src, base[-1], copies, period)
    run = link_ranks(base, work / f"ranks-{count}-x{copies}", count)
    for f in base:  # in the page cache: no way pays the disk
        f.read_bytes()
    print(f"{count} ranks ({copies} copies of the steps of the embedded pair, linked) made in "
          f"{time.perf_counter() - t0:.1f} s; {os.cpu_count()} CPU cores")
    ways = [("serial", [])]
    if workers > 1:
        ways.append((f"--workers {workers}", ["--workers", str(workers)]))
    client = None
    if cluster:
        from distributed import Client, LocalCluster

        local = LocalCluster(n_workers=cluster, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(local)
        client.wait_for_workers(cluster)
        ways.append((f"Dask, {cluster} workers", ["--scheduler", local.scheduler_address]))
    import polars as pl

    print(f"{'detect, ' + str(count) + ' ranks':<30}{'wall s':>8}{'x serial':>10}{'cores':>7}  same")
    first: dict[str, tuple[float, object]] = {}
    try:
        for name, extra in ways:
            for rows in (False, True)[:2 if rows_too else 1]:  # the summary alone, then every kernel's row too
                out = work / "rows.parquet"
                args = ["detect", str(run[0].parent), *(["--out", str(out)] if rows else []), *extra]
                seconds, cpu, done = timed(args)
                if done.returncode != 0:
                    sys.exit(f"detect {' '.join(extra)} failed: {done.stderr.strip()[-500:]}")
                got = (done.stdout, pl.read_parquet(out) if rows else None)
                ref = first.setdefault(str(rows), (seconds, got))
                same = got[0] == ref[1][0] and (not rows or got[1].equals(ref[1][1]))
                label = f"{name}{', --out' if rows else ''}"
                print(f"{label:<30}{seconds:>8.1f}{ref[0] / seconds:>9.2f}x{cpu / seconds:>7.1f}  "
                      f"{'yes' if same else 'NO'}", flush=True)
    finally:
        if client is not None:
            client.close()
            local.close()
    print("cores: CPU time / wall time of the command and its local workers (a cluster's not counted)\n"
          "same: its output (and --out rows) as serial")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--copies", type=int, default=12, help="how many times each trace's steps are repeated")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=1, help="runs of each command (the fastest is kept)")
    ap.add_argument("--sweep", type=int, default=0, help="instead: N small traces, one corrupt, --workers")
    ap.add_argument("--keep", type=Path, help="build the traces here and keep them (default: a temp dir)")
    ap.add_argument("--ranks", type=int, default=0, help="instead: one run of N rank exports (e.g. 32)")
    ap.add_argument("--rank-copies", type=int, default=114, help="repeats of its steps (114: 11.7 M kernels at 32)")
    ap.add_argument("--cluster", type=int, default=0, help="with --ranks: also a Dask LocalCluster of N workers")
    ap.add_argument("--summary-only", action="store_true", help="with --ranks: no run with --out")
    args = ap.parse_args()
    if not args.ranks and not NSYS.is_dir():
        sys.exit(f"needs the shared corpus: {NSYS}")
    work = args.keep or Path(tempfile.mkdtemp(prefix="traceql-workers-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        if args.sweep:
            sweep(work, args.sweep, args.workers)
            return
        if args.ranks:
            many_ranks(work, args.ranks, args.rank_copies, args.workers, args.cluster, not args.summary_only)
            return
        t0 = time.perf_counter()
        traces = make_traces(work, args.copies)
        size = sum(f.stat().st_size for t in traces for f in ([t] if t.is_file() else t.iterdir())) / 2**20
        print(f"8 traces ({size:,.0f} MiB, {args.copies}-{3 * args.copies + 6} copies of the steps) made in "
              f"{time.perf_counter() - t0:.1f} s; {os.cpu_count()} CPU cores")
        compare(work, traces, args.workers, args.repeat)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
