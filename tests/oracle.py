"""Independent reference computations for tests: plain Python and sqlite3, no traceql code."""

from __future__ import annotations

import sqlite3
import statistics
from collections import defaultdict
from pathlib import Path


def exports(path: Path) -> list[Path]:
    """The nsys exports of a file or a run folder."""
    return sorted((path / "traces").glob("*.sqlite")) if path.is_dir() else [path]


def rows(path: Path, sql: str) -> list[tuple]:
    """``sql`` run with sqlite3 on one export, opened read-only."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def count(path: Path, sql: str) -> int:
    """A count taken with sqlite3 over every export of ``path``, summed."""
    return sum(rows(f, sql)[0][0] for f in exports(path))


def read_kernels(path: Path) -> list[dict]:
    """Kernels of an nsys export (or a run folder's exports) via sqlite3: the fields the definitions need."""
    if path.is_dir():
        return [k for f in exports(path) for k in read_kernels(f)]
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = con.execute("""
        SELECT k.start, k."end", k.deviceId, k.globalPid, s.value, k.gridX, k.gridY, k.gridZ,
               k.blockX, k.blockY, k.blockZ
        FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName""").fetchall()
    con.close()
    keys = ("start", "end", "device", "pid", "short", "gx", "gy", "gz", "bx", "by", "bz")
    out = [dict(zip(keys, r, strict=True)) for r in rows]
    for k in out:
        k["comm"] = k["short"].lower().startswith(("nccl", "rccl", "hccl"))
        k["signature"] = f"{k['short']} g{k['gx']}x{k['gy']}x{k['gz']} b{k['bx']}x{k['by']}x{k['bz']}"
    return out


def union_overlap(start: int, end: int, intervals: list[tuple[int, int]]) -> int:
    """Length of [start, end) ∩ (union of intervals), by merging the intervals one by one."""
    merged: list[list[int]] = []
    for s, e in sorted(intervals):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return sum(max(0, min(end, e) - max(start, s)) for s, e in merged)


def overlaps(kernels: list[dict], compute: list[dict]) -> list[int]:
    """comm_overlap_ns of each kernel in ``compute`` against all comm kernels of the same device."""
    comm = defaultdict(list)
    for k in kernels:
        if k["comm"]:
            comm[(k["pid"], k["device"])].append((k["start"], k["end"]))
    return [union_overlap(k["start"], k["end"], comm[(k["pid"], k["device"])]) for k in compute]


def isolated_medians(path: Path) -> dict[str, float]:
    by_sig = defaultdict(list)
    for k in read_kernels(path):
        if not k["comm"]:
            by_sig[k["signature"]].append(k["end"] - k["start"])
    return {s: statistics.median(v) for s, v in by_sig.items()}
