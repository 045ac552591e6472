"""Independent reference computations for tests: plain Python and sqlite3, no traceql code."""

from __future__ import annotations

import difflib
import re
import sqlite3
import statistics
from collections import Counter, defaultdict
from pathlib import Path


def exports(path: Path) -> list[Path]:
    """The nsys exports of a file, a run folder or a folder of exports."""
    if not path.is_dir():
        return [path]
    return sorted((path / "traces").glob("*.sqlite")) or sorted(path.glob("*.sqlite"))


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


def read_kernels(path: Path, *, keyed: bool = False) -> list[dict]:
    """Kernels of an nsys export (or a run folder's exports) via sqlite3: the fields the definitions need;
    with ``keyed``, also the demangled key, the correlation id and the launch (runtime call start)."""
    if path.is_dir():
        return [k for f in exports(path) for k in read_kernels(f, keyed=keyed)]
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = con.execute("""
        SELECT k.start, k."end", k.deviceId, k.globalPid, s.value, k.gridX, k.gridY, k.gridZ,
               k.blockX, k.blockY, k.blockZ, d.value, k.correlationId
        FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName
        LEFT JOIN StringIds d ON d.id = k.demangledName""").fetchall()
    launch = dict(((r[0], r[1]), r[2]) for r in con.execute("""
        SELECT globalTid >> 24, correlationId, min(start) FROM CUPTI_ACTIVITY_KIND_RUNTIME GROUP BY 1, 2""")
    ) if keyed else {}
    con.close()
    keys = ("start", "end", "device", "pid", "short", "gx", "gy", "gz", "bx", "by", "bz", "demangled", "corr")
    out = [dict(zip(keys, r, strict=True)) for r in rows]
    for k in out:
        k["comm"] = k["short"].lower().startswith(("nccl", "rccl", "hccl"))
        shape = f"g{k['gx']}x{k['gy']}x{k['gz']} b{k['bx']}x{k['by']}x{k['bz']}"
        k["signature"] = f"{k['short']} {shape}"
        if keyed:
            k["key"] = f"{k['demangled'] or k['short']} {shape}"
            k["launch"] = launch.get((k["pid"] >> 24, k["corr"]))
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


STEP_NAME = re.compile(r"^step_(\d+)(_nosync)?$")


def nsys_steps(path: Path, table: str = "CUPTI_ACTIVITY_KIND_KERNEL") -> dict[tuple[int, int], tuple[int, str] | None]:
    """``(process id, correlation id) → (step, kind)`` of every kernel (or row of another CUPTI activity
    ``table``) of an nsys export (or run folder): the NVTX ``step_<i>[_nosync]`` range of its process holding
    the start of its runtime call; None outside. The process id is the operating system's (``globalPid >> 24``,
    low 24 bits)."""
    out: dict[tuple[int, int], tuple[int, str] | None] = {}
    for f in exports(path):
        launch = {(r[0], r[1]): r[2] for r in rows(f, """
            SELECT (globalTid >> 24) & 16777215, correlationId, min(start) FROM CUPTI_ACTIVITY_KIND_RUNTIME
            GROUP BY 1, 2""")}
        ranges = defaultdict(list)
        for pid, start, end, text in rows(f, """
                SELECT (n.globalTid >> 24) & 16777215, n.start, n."end", coalesce(n.text, s.value)
                FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId WHERE n.eventType = 59"""):
            m = STEP_NAME.match(text or "")
            if m:
                ranges[pid].append((start, end, int(m.group(1)), "isolated" if m.group(2) else "sync"))
        for pid, corr in rows(f, f"SELECT (globalPid >> 24) & 16777215, correlationId FROM {table}"):
            t = launch.get((pid, corr))
            hits = [(s, k) for a, b, s, k in ranges[pid] if t is not None and a <= t <= b]
            out[(pid, corr)] = hits[0] if hits else None
    return out


def twin_labels(trace: Path, iso: Path, factor: float = 1.2) -> dict[tuple[int, int], tuple[float | None, bool | None]]:
    """``(device, start) → (twin baseline, is case)`` for every compute kernel of ``trace``, by the twin
    definition, against the isolated run ``iso`` (both nsys, so demangled names compare as they are). Where
    communication overlapped a kernel, its baseline is at least its duration minus that overlap (a kernel loses
    at most what overlapped), and a case's excess is over two ticks of nsys' nanosecond clock. A kernel with no
    twin is not a case, and undecided (None) where communication overlapped it."""
    def stepped(path: Path) -> tuple[list[dict], dict[tuple, list[dict]]]:
        kernels = read_kernels(path, keyed=True)
        steps = nsys_steps(path)
        by_step = defaultdict(list)
        for k in kernels:
            s = steps.get(((k["pid"] >> 24) & 0xFFFFFF, k["corr"]))
            if s is not None and not k["comm"]:
                by_step[(k["pid"], *s)].append(k)
        for ks in by_step.values():
            ks.sort(key=lambda k: (k["launch"], k["start"]))
        return kernels, by_step

    _, ref_steps = stepped(iso)
    seqs = {key: tuple(k["key"] for k in ks) for key, ks in ref_steps.items()}
    canonical = Counter(seqs.values()).most_common(1)[0][0]
    durations = defaultdict(list)
    for key, ks in ref_steps.items():
        for i, j in _aligned(seqs[key], canonical):
            durations[j].append(ks[i]["end"] - ks[i]["start"])
    kernels, steps = stepped(trace)
    overlap = dict(zip(((k["device"], k["start"]) for k in kernels if not k["comm"]),
                       overlaps(kernels, [k for k in kernels if not k["comm"]]), strict=True))
    out = {(k["device"], k["start"]): (None, None if overlap[(k["device"], k["start"])] > 0 else False)
           for k in kernels if not k["comm"]}
    for ks in steps.values():
        for i, j in _aligned(tuple(k["key"] for k in ks), canonical):
            k = ks[i]
            base, dur, over = statistics.median(durations[j]), k["end"] - k["start"], overlap[(k["device"], k["start"])]
            if over > 0:
                base = max(base, dur - over)
            out[(k["device"], k["start"])] = (base, over > 0 and dur > factor * base and dur - base > 2)
    return out


def _aligned(seq: tuple, canonical: tuple) -> list[tuple[int, int]]:
    """(index in seq, index in canonical) pairs of their longest matching blocks."""
    blocks = difflib.SequenceMatcher(None, seq, canonical, autojunk=False).get_matching_blocks()
    return [(i + n, j + n) for i, j, size in blocks for n in range(size)]


def kernel_groups(path: Path) -> list[dict]:
    """The kernels of an nsys export (or run folder) grouped by demangled name (over every export), largest total
    GPU time first: ``name, short, comm, count, total_ns`` — plain sqlite3 sums of ``end - start``."""
    groups: dict[str, dict] = {}
    for f in exports(path):
        for name, short, n, total in rows(f, """
                SELECT coalesce(d.value, s.value), s.value, count(*), sum(k."end" - k.start)
                FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName
                LEFT JOIN StringIds d ON d.id = k.demangledName GROUP BY 1, 2"""):
            g = groups.setdefault(name, {"name": name, "short": short, "count": 0, "total_ns": 0,
                                         "comm": short.lower().startswith(("nccl", "rccl", "hccl"))})
            g["count"] += n
            g["total_ns"] += total
    return sorted(groups.values(), key=lambda g: -g["total_ns"])


NCCL_ALGORITHMS = ("COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS_TREE", "NVLS", "RING", "TREE", "PAT")
NCCL_PROTOCOLS = ("LL128", "LL", "SIMPLE")


def nccl_collective(name: str) -> str:
    """``ncclDevKernel_AllReduce_Sum_f32_RING_LL`` → ``AllReduce/RING/LL``: the word after the kernel family,
    then the algorithm and the protocol the name carries (either may be absent: ``SendRecv``)."""
    words = name.split("(")[0].split("_")
    rest = "_" + "_".join(words[2:]) + "_"
    algorithm = next((a for a in NCCL_ALGORITHMS if f"_{a}_" in rest), None)
    protocol = next((p for p in NCCL_PROTOCOLS if f"_{p}_" in rest), None)
    return "/".join(w for w in (words[1], algorithm, protocol) if w)


def collectives(path: Path) -> dict[str, tuple[int, int]]:
    """``collective → (count, total ns)`` of the communication kernels of an nsys export (or run folder)."""
    out: dict[str, tuple[int, int]] = {}
    for g in kernel_groups(path):
        if g["comm"]:
            n, total = out.get(nccl_collective(g["short"]), (0, 0))
            out[nccl_collective(g["short"])] = (n + g["count"], total + g["total_ns"])
    return out


def step_ranges(path: Path) -> dict[tuple[int, int, str], tuple[int, int]]:
    """``(process id, step, kind) → (start, end)`` of the NVTX ``step_<i>[_nosync]`` ranges of an nsys export
    (or run folder); kind ``sync``, or ``isolated`` for ``_nosync``."""
    out = {}
    for f in exports(path):
        for pid, start, end, text in rows(f, """
                SELECT (n.globalTid >> 24) & 16777215, n.start, n."end", coalesce(n.text, s.value)
                FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId WHERE n.eventType = 59"""):
            m = STEP_NAME.match(text or "")
            if m:
                out[(pid, int(m.group(1)), "isolated" if m.group(2) else "sync")] = (start, end)
    return out


GPU_ACTIVITY = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")


def step_gpu_extents(path: Path) -> dict[tuple[int, int, str], tuple[int, int]]:
    """``(process id, step, kind) → (first start, last end)`` of the GPU activities (kernels, memory copies and
    sets) each step launched, by :func:`nsys_steps`' attribution."""
    out: dict[tuple[int, int, str], tuple[int, int]] = {}
    for f in exports(path):
        tables = {r[0] for r in rows(f, "SELECT name FROM sqlite_master WHERE type = 'table'")}
        for table in (t for t in GPU_ACTIVITY if t in tables):  # an export has no table of what it never saw
            steps = nsys_steps(f, table)
            for pid, corr, start, end in rows(f, f"""
                    SELECT (globalPid >> 24) & 16777215, correlationId, start, "end" FROM {table}"""):
                step = steps.get((pid, corr))
                if step is not None:
                    key = (pid, *step)
                    first, last = out.get(key, (start, end))
                    out[key] = (min(first, start), max(last, end))
    return out
