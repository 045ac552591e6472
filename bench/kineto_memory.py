"""Peak memory of reading a large Kineto trace, against loading the same JSON whole with json.load.

    python bench/kineto_memory.py [TRACE.json.gz] [--copies 8]

Builds, in a temp folder, a trace COPIES times longer than the given real one (its events repeated with
shifted timestamps) and measures, each in a fresh process: `traceql info` on it (with the compiled reader,
then with the streaming reader alone), and json.load of it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT = Path(__file__).resolve().parents[2] / "shared/datasets/h200-ddp/kineto/toy_ddp2_cap25/rank0.json.gz"


def enlarge(src: Path, dst: Path, copies: int) -> tuple[int, int]:
    doc = json.loads(gzip.decompress(src.read_bytes()))
    events = doc["traceEvents"]
    span = max(e.get("ts", 0) + e.get("dur", 0) for e in events if isinstance(e.get("ts"), (int, float)))
    start = min(e["ts"] for e in events if isinstance(e.get("ts"), (int, float)))
    out = []
    for i in range(copies):
        for e in events:
            e2 = dict(e)
            if isinstance(e2.get("ts"), (int, float)):
                e2["ts"] = round(e2["ts"] + i * (span - start + 1000), 3)
            out.append(e2)
    doc["traceEvents"] = out
    raw = json.dumps(doc).encode()
    dst.write_bytes(gzip.compress(raw, compresslevel=1))
    return len(raw), len(out)


def peak_mib(code: str) -> tuple[float, float]:
    """Run ``code`` in a fresh interpreter; its own peak resident memory (MiB) and wall time."""
    probe = "; import resource; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code + probe], check=True, capture_output=True, text=True).stdout
    return int(out.split()[-1]) / 1024, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trace", nargs="?", type=Path, default=DEFAULT)
    ap.add_argument("--copies", type=int, default=8)
    ap.add_argument("--make", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.make:
        print(*enlarge(args.trace, args.make, args.copies))
        return
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "rank0.json.gz"
        # built in a child process: a child's peak memory starts from its parent's
        made = subprocess.run([sys.executable, __file__, str(args.trace), "--copies", str(args.copies), "--make",
                               str(big)], check=True, capture_output=True, text=True).stdout.split()
        raw_bytes, n = int(made[0]), int(made[1])
        print(f"trace: {n:,} events, {raw_bytes / 2**20:.0f} MiB of JSON ({big.stat().st_size / 2**20:.0f} MiB gz)")
        base, _ = peak_mib("import traceql")
        read = f"t = traceql.read_trace({str(big)!r}); traceql.trace_info(t)"
        tq, t_tq = peak_mib(f"import traceql; {read}")
        # the same with the streaming reader alone (what reads a trace the compiled reader hands over)
        stream = "from traceql.sources import kineto_file; kineto_file.decode = lambda p: None"
        st, t_st = peak_mib(f"import traceql; {stream}; {read}")
        print(f"  python + imports           {base:7.0f} MiB peak")
        print(f"  traceql read + info        {tq:7.0f} MiB peak   {t_tq:5.1f} s")
        print(f"    streaming reader alone   {st:7.0f} MiB peak   {t_st:5.1f} s")
        js, t_js = peak_mib(f"import gzip, json; json.load(gzip.open({str(big)!r}))")
        print(f"  json.load (whole document) {js:7.0f} MiB peak   {t_js:5.1f} s")


if __name__ == "__main__":
    main()
