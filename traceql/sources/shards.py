"""A run read a part at a time: each of its trace files on its own, with the ranks, run id and clock offset the
whole run read at once would give it.

    parts = shards(["runs/gpt2-32rank"])       # one per rank file, or None where a run cannot be split
    with read_trace(shard=parts[3]) as trace:  # that rank alone, as it is in its run
        ...

A reader that can split its runs declares ``plan(files, windows=...)``: each run of its files (grouped as its
``load`` groups them) with the plan of that run, which ``load(model, files, plan)`` then follows for any of
the run's files, and whose ``place(path)`` says where a file's kernels come in the run read whole
(``nsys_plan``, ``kineto_plan``); a plan with ``parts_of(path)`` reads a file too large for one part in parts
(``load(model, [file], plan, part)``: nsys, a process and a window of its steps at a time). A run of one
file of ordinary size is one shard: it is read whole, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from traceql.analyzers.machine import threads
from traceql.sources import inputs, registry
from traceql.sources.files import InputFile


@dataclass(frozen=True)
class Shard:
    """Trace files of one run, read together and apart from the rest of the run, as the run's ``plan`` says;
    ``part``: only that part of the one file (a reader's: ``nsys_plan.Part``), None for all of it."""

    files: tuple[InputFile, ...]
    plan: Any
    fmt: str
    part: Any = None

    @property
    def name(self) -> str:
        return ", ".join(str(f.path) for f in self.files) + (self.part.describe() if self.part is not None else "")

    @property
    def windowed(self) -> bool:
        """Whether the shard is a window of a file's steps (whose breakdown and references span windows)."""
        return self.part is not None and getattr(self.part, "window", None) is not None

    def size(self) -> int:
        """The shard's bytes on disk (what reading it costs, roughly)."""
        return sum(f.path.stat().st_size for f in self.files)

    def kernels(self) -> int | None:
        """About how many kernels the shard holds, where its plan counted them (``held``: nsys); else None."""
        held = getattr(self.plan, "held", None)
        return held(self.files[0].path, self.part) if held is not None and len(self.files) == 1 else None


AT_ONCE = 2  # shards read at once on threads of this process, where it may use as many cores ...
PAIRED_KERNELS = 500_000  # ... and no shard holds more kernels than this (its plan's count)


def at_once(shards: Sequence[Shard]) -> int:
    """How many of a run's shards this process reads (and labels: ``labelling.by_rank``'s passes) at once, on
    threads: :data:`AT_ONCE` where the process may use as many cores and every shard's kernels were counted
    (nsys) and are at most :data:`PAIRED_KERNELS` (two shards of 475,000 kernels at once: `detect`'s peak
    1,427 MB), else one (a shard as large as the memory bound allows, or uncounted, is read alone). The
    results are the same either way."""
    counted = [s.kernels() for s in shards]
    if len(shards) < 2 or any(n is None or n > PAIRED_KERNELS for n in counted):
        return 1
    return min(AT_ONCE, threads())


# a run whose trace files hold more is read a shard at a time by the commands that could read it whole (`ranks`,
# `whatif`, `collectives`): read whole, 1.9 M kernels in 300 MB of exports took 2.6 GB (`detect`'s passes: 1.5)
LARGE_BYTES = 64 << 20


def large(paths: str | Path | Sequence[str | Path] | None, above: int | None = None) -> list[Shard] | None:
    """The shards of one run (:func:`shards`) where its trace files hold more than ``above`` bytes (default
    :data:`LARGE_BYTES`) and it has more than one; else None (read it whole)."""
    given = [paths] if isinstance(paths, (str, Path)) else list(paths or [])
    size = sum(f.path.stat().st_size for f in inputs.resolve(given or None))
    if size <= (LARGE_BYTES if above is None else above):
        return None
    parts = shards(given or None)
    return parts if parts is not None and len(parts) > 1 else None


def shards(paths: str | Path | Sequence[str | Path] | None, *, windows: bool = True,
           pool: Any = None) -> list[Shard] | None:
    """The shards of the inputs of one run (files or folders; None: the embedded example), one per trace file in
    the order the run reads them, or (``windows``) per part of a file too large to read at once; None where
    the run cannot be read a part at a time: files of several formats, Nsight Compute metrics among them, or a
    format whose reader makes no plan. The files are planned while ``pool``'s workers start, where given (a
    ``traceql.parallel.Pool``)."""
    given = [paths] if isinstance(paths, (str, Path)) else list(paths or [])
    files = inputs.resolve(given or None)
    formats = {f.fmt for f in files}
    if len(formats) != 1:
        return None
    fmt = formats.pop()
    reader = registry.reader(fmt)
    if not hasattr(reader, "plan"):
        return None
    planned = reader.plan(files, windows=windows, pool=pool)
    parts = [Shard((f,), run_plan, fmt, part) for group, run_plan in planned for f in group
             for part in (run_plan.parts_of(f.path) if hasattr(run_plan, "parts_of") else (None,))]
    # the run's order: by run id, then rank (a file's windows in their order: the sort keeps it)
    return sorted(parts, key=lambda s: s.plan.place(s.files[0].path))


def load(model: Any, shard: Shard) -> list[str]:
    """Put one shard into ``model`` through its reader (``sources.load`` for a whole run); its notes."""
    reader = registry.reader(shard.fmt)
    if shard.part is None:
        return reader.load(model, list(shard.files), shard.plan) or []
    return reader.load(model, list(shard.files), shard.plan, shard.part) or []
