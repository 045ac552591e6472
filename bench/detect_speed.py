"""Time `detect` on a real export against a bare DuckDB count of its kernel table, side by side.

    python bench/detect_speed.py [EXPORT.sqlite] [--repeat 5]

Both run in this process, alternating, after one warm-up; medians are printed with their ratio. `detect`
computes each time (``TRACEQL_NO_RESULT_CACHE``); the last row is the same export's `detect` served the result
an earlier one kept (in the user's cache folder, or ``TRACEQL_CACHE_DIR``). The bare
count is the floor any DuckDB-based reader pays: connect, load the sqlite extension, attach, count.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from traceql.commands.detect import detect
from traceql.labelling import memo
from traceql.model import engine
from traceql.trace import read_trace

DEFAULT = Path(__file__).resolve().parents[2] / "shared/datasets/h200-ddp/nsys/gpt2_ddp2_cap2.sqlite"


def bare_count(path: Path) -> int:
    con = engine.connect()
    con.execute(f"ATTACH {engine.sql_literal(str(path))} AS f (TYPE SQLITE, READ_ONLY)")
    n = con.execute("SELECT count(*) FROM f.CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    con.close()
    return n


def timed(fn, *args, **kwargs) -> float:
    t0 = time.perf_counter()
    fn(*args, **kwargs)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("export", nargs="?", type=Path, default=DEFAULT)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    kernels = bare_count(args.export)
    os.environ[memo.OFF_ENV] = "1"  # each detect computes its labels (the last row: its result kept, served)
    detect(args.export)  # warm-up: imports, caches
    stages = {"bare DuckDB count": [], "open (read_trace)": [], "detect (single trace)": [],
              "detect, its result kept": []}
    for _ in range(args.repeat):
        stages["bare DuckDB count"].append(timed(bare_count, args.export))
        stages["open (read_trace)"].append(timed(lambda: read_trace(args.export).close()))
        stages["detect (single trace)"].append(timed(detect, args.export))
    del os.environ[memo.OFF_ENV]
    detect(args.export)  # kept
    for _ in range(args.repeat):
        stages["detect, its result kept"].append(timed(detect, args.export))
    print(f"{args.export.name}: {kernels:,} kernels, {args.repeat} runs each, medians (min-max)")
    floor = statistics.median(stages["bare DuckDB count"])
    for name, runs in stages.items():
        med = statistics.median(runs)
        print(f"  {name:<24}{med:8.3f} s  ({min(runs):.3f}-{max(runs):.3f})  {med / floor:6.1f}x the bare count")


if __name__ == "__main__":
    main()
