"""The plan of an nsys run read one export at a time: every export's processes given their run-level ranks, and
its clock offset, from each export's process ids and session start alone (no activity is read).

Reading the exports of a run one by one with their plan gives each the ranks, run id and clock offset the
whole run read at once gives it (``nsys.load``).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from traceql.model.engine import connect
from traceql.sources import by_run
from traceql.sources.inputs import InputFile
from traceql.sources.nsys_attach import KERNEL_TABLE, READ_ERRORS, NsysFile, attach, empty_kernels, fail
from traceql.sources.ranks import RankAssignment, assign_ranks


@dataclass(frozen=True)
class RunPlan:
    """Every rank of a run's exports (their processes' ranks and the run's id), and each export's clock offset:
    what its session started after the run's first (its times count from its own start)."""

    ranks: tuple[RankAssignment, ...]
    offsets: dict[Path, int]

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


def _processes(path: Path, alias: str, con: object, scratch: Path, wal: bool) -> NsysFile:
    """One export attached, its processes that ran kernels read (``pids``), detached."""
    copy = None
    if wal:
        copy = scratch / f"{alias}-{path.name}"
        shutil.copyfile(path, copy)
    f = attach(con, path, alias, read_from=copy, scratch=scratch)  # type: ignore[arg-type]
    try:
        f.pids = [r[0] for r in con.execute(  # type: ignore[attr-defined]
            f"SELECT DISTINCT coalesce(globalPid, 0) AS p FROM {alias}.{KERNEL_TABLE} ORDER BY p").fetchall()]
    except READ_ERRORS as exc:
        raise fail(path, exc) from exc
    finally:
        con.execute(f"DETACH {alias}")  # type: ignore[attr-defined]
    if not f.pids:
        raise empty_kernels(path)
    return f


def plan(files: list[InputFile]) -> list[tuple[list[InputFile], RunPlan]]:
    """Each run of ``files`` (grouped as :func:`traceql.sources.nsys.load` groups them) and its plan."""
    out = []
    con = connect()
    try:
        with tempfile.TemporaryDirectory(prefix="traceql-") as scratch:
            for run, group in by_run(files).items():
                found = [_processes(f.path, f"plan{i}", con, Path(scratch), f.wal) for i, f in enumerate(group)]
                ranks = assign_ranks({f.path: f.pids for f in found}, run)
                out.append((group, RunPlan(tuple(ranks), offsets(found))))
    finally:
        con.close()
    return out
