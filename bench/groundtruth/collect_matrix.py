"""Collect a batch of the ground-truth matrix on a GPU host with our own ``traceql collect``.

    python bench/groundtruth/collect_matrix.py --batch a --out DIR [--gpus 4] [--deadline 520] [--skip N,N]

Runs the batch's runs (``plan.py``) in order, as many at once as the host has GPUs for (a 2-GPU run on GPUs
0,1 beside another on 2,3; a twin on each free GPU; a 4-GPU run alone), each under nsys (6 captured steps
unless the plan says).
No run starts after ``--deadline`` seconds. Each finished run folder keeps its manifest, rank results and
logs and its exports compressed with xz (``.sqlite.xz``; the ``.nsys-rep`` reports are dropped); the folders
are packed into tar files of at most 15 MiB under DIR with ``summary.json`` (each run's GPUs, wall time and
status).

On a GPU host that has torch but not traceql's analysis packages, put the source tree on PYTHONPATH in the
installed layout (``collect`` needs only torch)::

    mkdir -p /tmp/pp && cp -r traceql /tmp/pp/ && cp -r collectors analyzers /tmp/pp/traceql/
    PYTHONPATH=/tmp/pp python bench/groundtruth/collect_matrix.py --batch b --out $OUT
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import re
import shutil
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from plan import Run, plan  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CHUNK = 15 << 20
TOTAL = 62 << 20


def prepare(run: Run, scratch: Path, gpus: list[int]) -> Path:
    """The example folder copied for this run, its global_config naming the GPUs it got."""
    folder = scratch / "inputs" / run.name / run.example
    shutil.copytree(ROOT / "datasets" / "examples" / run.example, folder, dirs_exist_ok=True)
    cfg = json.loads((folder / "global_config.json").read_text())
    cfg["cuda_visible_devices"] = ",".join(map(str, gpus))
    (folder / "global_config.json").write_text(json.dumps(cfg, indent=2))
    return folder


def command(run: Run, folder: Path, out: Path, cpu: bool = False) -> list[str]:
    sets = [x for k, v in run.settings().items() for x in ("--set", f"{k}={json.dumps(v)}")]
    how = ["--profiler", "none", "--device", "cpu"] if cpu else ["--profiler", "nsys"]
    return [sys.executable, "-m", "traceql", "collect", str(folder), *how, "--steps", str(run.steps),
            "--isolated-steps", str(run.isolated), "--timeout", "120", "--out", str(out), *sets]


PROGRESS = re.compile(r"(\r?\[1/1\] \[[^\]]*\] [^\r\n\[]*)+")  # nsys's progress bar, redrawn in place


def shrink(out: Path) -> None:
    """xz the exports, drop the reports nsys wrote beside them and nsys's progress bars from the logs."""
    for log in (out / "logs").glob("*.log"):
        with log.open(newline="", errors="replace") as f:  # the bars redraw with carriage returns: kept as they are
            text = f.read()
        with log.open("w", newline="") as f:
            f.write(PROGRESS.sub("", text))
    for rep in (out / "traces").glob("*.nsys-rep"):
        rep.unlink()
    for export in (out / "traces").glob("*.sqlite"):
        with export.open("rb") as src, lzma.open(export.with_suffix(".sqlite.xz"), "wb", preset=6) as dst:
            shutil.copyfileobj(src, dst)
        export.unlink()


def execute(run: Run, gpus: list[int], scratch: Path, record: dict, cpu: bool) -> None:
    out = scratch / "runs" / run.name
    folder = prepare(run, scratch, gpus)
    t0 = time.time()
    # run from scratch: `python -m traceql` in the checkout would import the source tree over the installed package
    res = subprocess.run(command(run, folder, out, cpu), capture_output=True, text=True, env={**os.environ},
                         cwd=scratch)
    record.update(gpus=gpus, started=t0, wall_s=round(time.time() - t0, 1), rc=res.returncode,
                  tail=(res.stdout + res.stderr)[-600:])
    if out.exists():
        shrink(out)


def pack(scratch: Path, dest: Path, records: dict) -> None:
    """The finished run folders into tar files of at most CHUNK bytes, at most TOTAL in all."""
    tars, size, total, tar = 0, 0, 0, None
    for name, rec in records.items():
        folder = scratch / "runs" / name
        if not folder.exists():
            continue
        bytes_ = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
        if total + bytes_ > TOTAL:
            rec["packed"] = False
            continue
        if tar is None or size + bytes_ > CHUNK:
            if tar is not None:
                tar.close()
            tar, size, tars = tarfile.open(dest / f"runs-{tars:02d}.tar", "w"), 0, tars + 1
        tar.add(folder, arcname=name)
        size, total, rec["packed"] = size + bytes_, total + bytes_, True
    if tar is not None:
        tar.close()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--gpus", type=int, default=4)
    ap.add_argument("--deadline", type=float, default=520)
    ap.add_argument("--skip", default="", help="run names already collected, comma separated")
    ap.add_argument("--scratch", type=Path, default=Path("/tmp/gt"), help="where runs are made (emptied first)")
    ap.add_argument("--cpu", action="store_true", help="a smoke test: gloo on CPU, no profiler")
    ap.add_argument("--only", default="", help="collect these run names alone, comma separated")
    args = ap.parse_args()
    scratch = args.scratch
    shutil.rmtree(scratch, ignore_errors=True)
    skip, only = set(filter(None, args.skip.split(","))), set(filter(None, args.only.split(",")))
    queue = [r for r in plan(args.batch) if r.world <= args.gpus and r.name not in skip
             and (not only or r.name in only)]
    free, lock, threads, records = list(range(args.gpus)), threading.Lock(), [], {}
    t0 = time.time()

    def work(run: Run, gpus: list[int]) -> None:
        try:
            execute(run, gpus, scratch, records[run.name], args.cpu)
        finally:
            with lock:
                free.extend(gpus)
                free.sort()

    for run in queue:
        while True:
            with lock:
                if len(free) >= run.world:
                    gpus, free[:] = free[:run.world], free[run.world:]
                    break
            time.sleep(0.2)
        if time.time() - t0 > args.deadline:
            with lock:
                free.extend(gpus)
            break
        records[run.name] = {}
        print(f"{time.time() - t0:6.1f} s  start {run.name} on GPUs {gpus}", flush=True)
        th = threading.Thread(target=work, args=(run, gpus))
        th.start()
        threads.append(th)
    for th in threads:
        th.join()
    args.out.mkdir(parents=True, exist_ok=True)
    pack(scratch, args.out, records)
    summary = {"batch": args.batch, "elapsed_s": round(time.time() - t0, 1), "runs": records,
               "not_started": [r.name for r in queue if r.name not in records]}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    for name, rec in records.items():
        print(f"{name:34} rc {rec.get('rc')} {rec.get('wall_s')} s GPUs {rec.get('gpus')} packed {rec.get('packed')}")
    print(f"elapsed {summary['elapsed_s']} s; not started: {len(summary['not_started'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
