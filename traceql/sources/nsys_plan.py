"""The plan of an nsys run read one export at a time: every export's processes given their run-level ranks, and
its clock offset, from each export's process ids and session start alone (no activity is read).

Reading the exports of a run one by one with their plan gives each the ranks, run id and clock offset the
whole run read at once gives it (``nsys.load``). An export whose process ran more kernels than
:data:`WINDOW_KERNELS` is read in parts: a process at a time, each a window of its steps at a time (its
kernels launched from one step's start to a later one's, never cutting a step), so that no part holds more
kernels than that.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from traceql.analyzers.machine import cores
from traceql.model import step_marker
from traceql.model.engine import connect
from traceql.sources.files import InputFile, by_run
from traceql.sources.nsys_attach import KERNEL_TABLE, READ_ERRORS, NsysFile, attach, detach, empty_kernels, fail
from traceql.sources.ranks import RankAssignment, assign_ranks

WINDOW_ENV = "TRACEQL_WINDOW_KERNELS"
WINDOW_KERNELS = 1_000_000  # kernels of one process from which an export is read a window of steps at a time
NVTX_RANGES = (59, 60)  # NvtxPushPopRange, NvtxStartEndRange


@dataclass(frozen=True)
class Part:
    """What one part of an export holds: its processes (None: all) and a window of launch times (``[lo, hi)``
    of each kernel's launch, else its start; None for either bound: open), on the export's own clock. The first
    window of a process (``first``) also reads every activity of the process, narrow, for its time breakdown."""

    pids: tuple[int, ...] | None = None
    window: tuple[int | None, int | None] | None = None
    first: bool = True
    # the window as correlation ids ([lo, hi) of the CUDA calls made in it): which rows to read at all
    calls: tuple[int | None, int | None] | None = None

    def describe(self) -> str:
        if self.window is None:
            return "" if self.pids is None else f" (process {self.pids[0]})"
        lo, hi = self.window
        who = self.pids[0] if self.pids else "*"
        return f" (process {who}, launches from {lo or 'the start'} to {hi or 'the end'})"


@dataclass(frozen=True)
class RunPlan:
    """Every rank of a run's exports (their processes' ranks and the run's id), and each export's clock offset:
    what its session started after the run's first (its times count from its own start); the parts each export
    is read in."""

    ranks: tuple[RankAssignment, ...]
    offsets: dict[Path, int]
    parts: dict[Path, tuple[Part, ...]] = field(default_factory=dict)
    kernels: dict[Path, dict[int, int]] = field(default_factory=dict)  # each export's kernels, by process

    def held(self, path: Path, part: Part | None) -> int | None:
        """About how many kernels one part of an export holds (a window: its process's share of them); None
        where they were not counted."""
        counts = self.kernels.get(path)
        if counts is None:
            return None
        if part is None or part.pids is None:
            return sum(counts.values())
        n = sum(counts.get(pid, 0) for pid in part.pids)
        windows = sum(1 for other in self.parts_of(path) if other.pids == part.pids)
        return -(-n // max(windows, 1))

    def parts_of(self, path: Path) -> tuple[Part, ...]:
        """The parts of one export (one, the whole of it, unless its processes are too large)."""
        return self.parts.get(path, (Part(),))

    def of(self, path: Path) -> list[RankAssignment]:
        """The ranks of one export."""
        return [r for r in self.ranks if r.path == path]

    def place(self, path: Path) -> tuple[str, int]:
        """Where an export's kernels come in the run read whole: its run id and first rank."""
        return min((r.run_id, r.rank) for r in self.of(path))


def offsets(files: list[NsysFile]) -> dict[Path, int]:
    """Each export's clock offset from the run's first session start (0 where an export gives none)."""
    starts = [f.session_start_ns for f in files if f.session_start_ns is not None]
    return {f.path: f.session_start_ns - min(starts) if f.session_start_ns is not None else 0 for f in files}


def window_kernels() -> int:
    """The kernels of one process from which an export is read in windows (``$TRACEQL_WINDOW_KERNELS``)."""
    text = os.environ.get(WINDOW_ENV, "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else WINDOW_KERNELS


def _boundaries(con: duckdb.DuckDBPyConnection, f: NsysFile, pid: int) -> list[int]:
    """The times a process's steps may be cut at: the start of each of its step ranges that begins after every
    earlier one has ended (a window of steps never cuts one in two)."""
    if "NVTX_EVENTS" not in f.tables:
        return []
    a = f.alias
    text = "coalesce(n.text, s.value)" if "StringIds" in f.tables else "n.text"
    strings = f"LEFT JOIN {a}.StringIds s ON s.id = n.textId" if "StringIds" in f.tables else ""
    asked = step_marker.pattern()
    # a step's ranges share its text; a pattern without a number marks each range a step of its own
    per = "n.start, n.\"end\"" if asked is not None and not step_marker.groups(asked) else text
    ranges = con.execute(f"""
        SELECT min(n.start) AS s, max(coalesce(n."end", n.start)) AS e FROM {a}.NVTX_EVENTS n {strings}
        WHERE n.eventType IN {NVTX_RANGES} AND (n.globalTid >> 24) = ({pid} >> 24)
          AND regexp_matches({text}, '{step_marker.step_text().replace("'", "''")}')
        GROUP BY {per} ORDER BY s""").fetchall()
    out, reach = [], None
    for start, end in ranges:
        if reach is not None and start >= reach:
            out.append(start)
        reach = end if reach is None else max(reach, end)
    return out


def _calls(con: duckdb.DuckDBPyConnection, f: NsysFile, pid: int, times: list[int]) -> list[int | None]:
    """For each time (ascending), the first CUDA call of the process made at or after it (its correlation id;
    None: none is): correlation ids follow the calls' order, so a window of time is a range of them. One scan:
    each call counted in the window of times it falls in, the first call of each window kept."""
    if "CUPTI_ACTIVITY_KIND_RUNTIME" not in f.tables:
        return [None] * len(times)
    after = " + ".join(f"(start >= {int(t)})::INTEGER" for t in times)  # how many of the times a call follows
    first = dict(con.execute(f"""SELECT {after} AS w, min(correlationId) FROM {f.alias}.CUPTI_ACTIVITY_KIND_RUNTIME
                                 WHERE (globalTid >> 24) = ({pid} >> 24) GROUP BY w""").fetchall())
    out: list[int | None] = []
    for i in range(len(times), 0, -1):  # the calls at or after times[i - 1]: those of windows i and later
        found = [c for c in (first.get(i), out[-1] if out else None) if c is not None]
        out.append(min(found) if found else None)
    return out[::-1]


def _parts(con: duckdb.DuckDBPyConnection, f: NsysFile, counts: dict[int, int], limit: int) -> tuple[Part, ...]:
    """An export's parts: itself, else (more than ``limit`` kernels) each process, in windows of steps of about
    ``limit`` kernels."""
    if sum(counts.values()) <= limit:
        return (Part(),)
    parts = []
    for pid, n in counts.items():
        cuts = _boundaries(con, f, pid) if n > limit else []
        every = max(1, round(limit * (len(cuts) + 1) / n)) if cuts else 1
        chosen = cuts[every - 1::every]
        if not chosen:
            parts.append(Part((pid,)))
            continue
        bounds, calls = [None, *chosen, None], [None, *_calls(con, f, pid, chosen), None]
        parts += [Part((pid,), (bounds[i], bounds[i + 1]), i == 0, (calls[i], calls[i + 1]))
                  for i in range(len(bounds) - 1)]
    return tuple(parts)


def _processes(path: Path, alias: str, con: duckdb.DuckDBPyConnection, scratch: Path, wal: bool,
               limit: int) -> tuple[NsysFile, tuple[Part, ...], dict[int, int]]:
    """One export attached, its processes that ran kernels read (``pids``) and its parts planned, detached; its
    kernels by process."""
    copy = None
    if wal:
        copy = scratch / f"{alias}-{path.name}"
        shutil.copyfile(path, copy)
    f = attach(con, path, alias, read_from=copy, scratch=scratch)
    try:
        counts = dict(con.execute(f"SELECT coalesce(globalPid, 0) AS p, count(*) FROM {alias}.{KERNEL_TABLE} "
                                  "GROUP BY p ORDER BY p").fetchall())
        f.pids = list(counts)
        parts = _parts(con, f, counts, limit) if counts else (Part(),)
    except READ_ERRORS as exc:
        raise fail(path, exc) from exc
    finally:
        detach(con, alias)
    if not f.pids:
        raise empty_kernels(path)
    return f, parts, counts


def _planned(i: int, f: InputFile, limit: int) -> tuple[NsysFile, tuple[Part, ...], dict[int, int]]:
    """One export's processes and parts, on a connection of its own (a thread may plan each export)."""
    con = connect()
    try:
        with tempfile.TemporaryDirectory(prefix="traceql-") as scratch:
            return _processes(f.path, f"plan{i}", con, Path(scratch), f.wal, limit)
    finally:
        con.close()


def plan(files: list[InputFile], *, windows: bool = True, pool: Any = None) -> list[tuple[list[InputFile], RunPlan]]:
    """Each run of ``files`` (grouped as :func:`traceql.sources.nsys.load` groups them) and its plan (its large
    exports in parts, unless ``windows`` is off). The exports of a run of several are planned on threads of
    this process (DuckDB's scans hold no Python lock), while ``pool``'s cluster starts, where given (a
    ``traceql.parallel.Pool``)."""
    limit = window_kernels() if windows else 2**62
    out = []
    for run, group in by_run(files).items():
        if len(group) > 1:
            with ThreadPoolExecutor(max_workers=min(len(group), cores())) as threads:
                futures = [threads.submit(_planned, i, f, limit) for i, f in enumerate(group)]
                if pool is not None:
                    pool.open()
                found = [f.result() for f in futures]
        else:
            found = [_planned(0, group[0], limit)]
        ranks = assign_ranks({f.path: f.pids for f, _, _ in found}, run)
        out.append((group, RunPlan(tuple(ranks), offsets([f for f, _, _ in found]),
                                   {f.path: parts for f, parts, _ in found},
                                   {f.path: counts for f, _, counts in found})))
    return out
