"""Soak: every reading command, in JSON, over the shipped runs and the shared exports, repeated while other
processes keep the CPU busy; a command that dies by a signal (a crash in a native library: DuckDB, polars,
their threads) or exits 70 (a bug) fails the soak.

    python bench/soak.py                    # 20 rounds of the core set under a 2-process CPU load
    python bench/soak.py --set all -n 1     # every shipped run, held-out matrix run and shared export once
    python bench/soak.py --set quick -n 2   # a few minutes (the test suite runs this one)
    python bench/soak.py --match llama -n 50 --commands ranks   # one command on a few traces, 50 times

Each command runs in a fresh process, ``python -X faulthandler -m traceql --quiet CMD ... --format json``, so a
crash while the interpreter starts or exits is seen too. A run fails on: death by a signal, exit 70, a traceback
or a fatal error on stderr, or stdout that is not JSON after exit 0 (other exit codes are answers: a trace
without what a command needs is exit 3). A failed command is printed with its exit, the Python stack of every
thread that faulthandler wrote, and, with ``--gdb`` (gdb installed), the native stack of every thread: the
command is run again under gdb until it fails again (at most ``--gdb`` times).

Sets: ``quick`` (the embedded example, the in-run run, a 4-rank straggler run, a Kineto run: 28 jobs), ``core``
(those, two more 4-rank runs, two held-out 4-rank runs of the ground-truth matrix and three shared exports where
../shared is present: 77 jobs, about two minutes a round on 2 cores) and ``all`` (every shipped run folder,
every matrix run with traces and every shared export). Exits 1 when any run failed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "datasets"
SHARED = ROOT.parent / "shared" / "datasets"
COMMANDS = ("info", "detect", "ranks", "collectives", "whatif", "query", "diff")
QUERY = "SELECT rank, kind, count(*) AS n, sum(end_ns - start_ns) AS ns FROM kernels GROUP BY ALL ORDER BY ALL"
QUICK = ("default/gpt2-nsys", "inrun/gpt2-inrun-nsys", "runs/gpt2-4rank-straggler-nsys", "runs/gpt2-torch")
CORE = (*QUICK, "runs/llama-4rank-straggler-nsys", "runs/gpt2-fsdp2-4rank-nsys")
HELD_OUT = ("h100-a/llama-4g-cap2-stock", "h100-b/gpt2-4g-cap25-stock")  # 4-rank runs of models and hosts
# nobody tuned on; and of the shared corpus, an export of one file for two ranks, a public H100 export, a public
# Kineto trace with communication kernels overlapping on one device
SHARED_CORE = ("h200-ddp/nsys/gpt2_ddp2_cap2.sqlite", "public/nsysai-h100/h100_2gpu_1s.sqlite",
               "public/hta-kineto/negative_queue_length_values_check")


@dataclass(frozen=True)
class Job:
    command: str
    trace: str
    args: tuple[str, ...]

    def argv(self) -> list[str]:
        return [sys.executable, "-X", "faulthandler", "-m", "traceql", "--quiet", *self.args]


def shipped(names: tuple[str, ...] | None) -> list[Path]:
    """The shipped run folders (``names`` of them, relative to ``datasets/``; None: every one with traces)."""
    if names is not None:
        return [DATA / n for n in names if (DATA / n).is_dir()]
    return sorted({p.parents[1] for p in DATA.glob("*/*/traces/*") if not p.name.endswith(".xz")})


def matrix_runs(names: tuple[str, ...] | None) -> list[Path]:
    """The ground-truth matrix's runs with traces, unpacked into the cache (``names``: ``gpu/run`` of them)."""
    from traceql.validation.matrix import load_matrix

    runs = [r for r in load_matrix().runs if not r.light]
    if names is not None:
        runs = [r for r in runs if f"{r.gpu}/{r.name}" in names]
    return [r.path() for r in runs]


def shared_exports() -> list[Path]:
    """The shared corpus' exports: the h200-ddp nsys files and Kineto runs, the public traces (none where
    ../shared is absent)."""
    if not SHARED.is_dir():
        return []
    h200 = SHARED / "h200-ddp"
    out = sorted(h200.glob("nsys/*.sqlite")) + sorted(p for p in h200.glob("kineto/*") if p.is_dir())
    out += sorted(SHARED.glob("public/*/*.sqlite")) + sorted(SHARED.glob("public/*/*.json.gz"))
    return out + sorted(p for p in SHARED.glob("public/hta-kineto/*") if p.is_dir())


def traces(which: str) -> list[Path]:
    if which == "quick":
        return shipped(QUICK)
    if which == "core":
        return shipped(CORE) + matrix_runs(HELD_OUT) + [SHARED / n for n in SHARED_CORE if (SHARED / n).exists()]
    return shipped(None) + matrix_runs(None) + shared_exports()


def jobs(paths: list[Path], commands: tuple[str, ...]) -> list[Job]:
    """Every command on every trace (``diff``: each trace against the embedded example)."""
    base = str(DATA / "default" / "gpt2-nsys")
    out = []
    for p in paths:
        name = str(p.relative_to(ROOT) if p.is_relative_to(ROOT) else p)
        for cmd in commands:
            args = {"query": ("query", str(p), QUERY), "diff": ("diff", base, str(p))}.get(cmd, (cmd, str(p)))
            out.append(Job(cmd, name, (*args, "--format", "json")))
    return out


def failure(job: Job, code: int, out: bytes, err: bytes) -> str | None:
    """Why a finished run failed the soak, or None."""
    text = err.decode(errors="replace")
    if code < 0:
        return f"killed by {signal.Signals(-code).name}"
    if code == 70:
        return "exit 70 (a bug)"
    if "Traceback (most recent call last)" in text or "Fatal Python error" in text:
        return f"exit {code} with a traceback"
    if code == 0:
        try:
            json.loads(out)
        except ValueError as exc:
            return f"exit 0 but stdout is not JSON ({exc})"
    return None


def run(job: Job, timeout: float) -> tuple[Job, int, float, str | None, str]:
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:  # each its own folder: nothing shared
        try:
            done = subprocess.run(job.argv(), cwd=tmp, capture_output=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            return job, -1, time.perf_counter() - t0, f"still running after {timeout:.0f} s", str(exc.stderr)
    why = failure(job, done.returncode, done.stdout, done.stderr)
    return job, done.returncode, time.perf_counter() - t0, why, done.stderr.decode(errors="replace")


def native_stack(job: Job, tries: int) -> str:
    """The command run under gdb until it fails (at most ``tries`` times): every thread's native stack."""
    gdb = shutil.which("gdb")
    if gdb is None:
        return "(gdb not found: no native stack)"
    argv = [gdb, "-batch", "-q", "-ex", "set pagination off", "-ex", "handle SIGPIPE nostop", "-ex", "run",
            "-ex", "thread apply all bt 30", "--args", *job.argv()]
    for _ in range(tries):
        done = subprocess.run(argv, capture_output=True, check=False, text=True, errors="replace")
        if "received signal" in done.stdout:
            return done.stdout[done.stdout.index("received signal") - 200:]
    return f"(did not fail again in {tries} runs under gdb)"


def load(count: int) -> list[subprocess.Popen[bytes]]:
    """``count`` processes that keep a core busy each, until the soak is gone (killed too)."""
    spin = "import os\nparent = os.getppid()\nwhile os.getppid() == parent:\n    pass"
    return [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(count)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", "--repeats", type=int, default=20, help="rounds over every job (default 20)")
    ap.add_argument("--set", choices=("quick", "core", "all"), default="core", help="which traces (default core)")
    ap.add_argument("--match", help="only the traces whose path holds this")
    ap.add_argument("--paths", nargs="+", type=Path, help="these traces (files or run folders) instead of a set")
    ap.add_argument("--commands", nargs="+", choices=COMMANDS, default=list(COMMANDS))
    ap.add_argument("--load", type=int, default=2, help="busy processes beside the soak (default 2)")
    ap.add_argument("-j", "--jobs", type=int, default=2, help="commands run at once (default 2)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds a command may take (default 600)")
    ap.add_argument("--minutes", type=float, help="start no round after this many minutes")
    ap.add_argument("--gdb", type=int, default=0, metavar="TRIES", help="rerun a failed command under gdb")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a kill stops the busy processes too
    paths = [p.resolve() for p in args.paths] if args.paths else traces(args.set)
    paths = [p for p in paths if args.match is None or args.match in str(p)]
    todo = jobs(paths, tuple(args.commands))
    print(f"{len(paths)} traces x {len(args.commands)} commands = {len(todo)} jobs, {args.repeats} rounds, "
          f"{args.jobs} at once, {args.load} busy processes beside", flush=True)
    busy, failed, codes, walls = load(args.load), [], Counter(), Counter()
    t0 = time.perf_counter()
    try:
        with ThreadPoolExecutor(args.jobs) as pool:
            for rnd in range(1, args.repeats + 1):
                for job, code, wall, why, err in pool.map(lambda j: run(j, args.timeout), todo):
                    codes[(job.command, code)] += 1
                    walls[job.command] += wall
                    if why:
                        failed.append(job)
                        print(f"FAILED round {rnd}: {why}: {' '.join(job.args)}\n{err[-4000:]}", flush=True)
                        if args.gdb:
                            print(native_stack(job, args.gdb), flush=True)
                print(f"round {rnd}: {len(failed)} failed so far ({time.perf_counter() - t0:,.0f} s)", flush=True)
                if args.minutes and time.perf_counter() - t0 > 60 * args.minutes:
                    break
    finally:
        for p in busy:
            p.kill()
    print("\ncommand   runs  exit codes           mean s")
    for cmd in args.commands:
        mine = {c: n for (k, c), n in codes.items() if k == cmd}
        n = sum(mine.values())
        said = ", ".join(f"{c}: {k}" for c, k in sorted(mine.items()))
        print(f"{cmd:8s} {n:5d}  {said:20s} {walls[cmd] / max(n, 1):6.2f}")
    print(f"{len(failed)} of {sum(codes.values())} runs failed (signal, exit 70, traceback or torn JSON)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
