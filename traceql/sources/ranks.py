"""Which rank each process of the input files is, and which files form one run."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import cast

RANK_IN_NAME = re.compile(r"rank[_-]?(\d+)", re.IGNORECASE)
MAX_RANK = 2**31 - 1  # ranks are 32-bit in the model


@dataclass(frozen=True)
class RankAssignment:
    """Rank ``rank`` of run ``run_id`` is process ``pid`` of file ``path``; ``rank_from`` says how we know."""

    path: Path
    pid: int
    run_id: str
    rank: int
    rank_from: str


def valid_rank(value: object) -> int | None:
    """``value`` as a rank: an integer from 0 to :data:`MAX_RANK` (not a bool, a float or text); else None."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_RANK:
        return value
    return None


def _name_number(path: Path) -> str | None:
    found = RANK_IN_NAME.findall(path.stem)
    return found[-1] if found else None


def rank_from_name(path: Path) -> int | None:
    """The rank a file name carries (``..._rank1.sqlite`` → 1), or None (also for a number past
    :data:`MAX_RANK`, which no rank is)."""
    number = _name_number(path)
    return valid_rank(int(number)) if number is not None and len(number) <= 12 else None


def name_rank_note(path: Path) -> str | None:
    """A warning for a file whose name carries a rank number that no rank can be; None for any other."""
    number = _name_number(path)
    if number is None or rank_from_name(path) is not None:
        return None
    shown = number if len(number) <= 24 else f"{number[:20]}... ({len(number)} digits)"
    return (f"warning: {path}: the rank in its name ({shown}) is past {MAX_RANK}, the largest rank: "
            "its name gives no rank")


def name_without_rank(path: Path) -> str:
    """A per-rank file's name without its rank and suffixes (``gpt2_rank0.sqlite`` → ``gpt2``)."""
    return RANK_IN_NAME.sub("", path.name.split(".")[0]).strip("_-.")


def run_name(paths: list[Path]) -> str:
    """A run's name from its per-rank files: their common name without the rank (``gpt2_rank0.sqlite``,
    ``gpt2_rank1.sqlite`` → ``gpt2``), else the name of the folder holding them, else the first file's."""
    stems = {name_without_rank(p) for p in paths}
    if len(stems) == 1 and (stem := stems.pop()):
        return stem
    return paths[0].resolve().parent.name or paths[0].name.split(".")[0]


def assign_ranks(processes: dict[Path, list[int]], run_id: str | None = None) -> list[RankAssignment]:
    """Assign ranks to the processes (sorted process ids) of each file, files in the order given.

    Files that each hold one process and whose names carry distinct rank numbers form one run (one
    profiler per rank). Otherwise each file is its own run and its processes are ranks in process-id
    order (one profiler around the whole launcher). ``run_id`` names the run of files that form one.
    """
    paths = list(processes)
    name_ranks = [rank_from_name(p) for p in paths]
    one_run = (
        (len(paths) > 1 or run_id is not None)
        and all(len(processes[p]) == 1 for p in paths)
        and None not in name_ranks
        and len(set(name_ranks)) == len(paths)
    )
    if one_run:
        run_id = run_id or run_name(paths)
        return [
            RankAssignment(p, processes[p][0], run_id, cast(int, r), "file name")  # no rank is None in one run
            for p, r in zip(paths, name_ranks, strict=True)
        ]
    out: list[RankAssignment] = []
    used: set[str] = set()
    for p, named in zip(paths, name_ranks, strict=True):
        stem = run_id if run_id and len(paths) == 1 else p.stem
        name, n = stem, 2
        while name in used:
            name, n = f"{stem}#{n}", n + 1
        used.add(name)
        pids = processes[p]
        if len(pids) == 1 and named is not None:
            out.append(RankAssignment(p, pids[0], name, named, "file name"))
            continue
        out.extend(RankAssignment(p, pid, name, i, "process order") for i, pid in enumerate(pids))
    return out
