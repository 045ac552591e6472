"""Several runs given together: which input files form each run.

`detect` labels each run on its own (its timeline read alone, its detector fitted on it alone), so that the
runs can be labelled in parallel and a run's labels never depend on what else was given with it
(``traceql.labelling.result.merge`` makes one result of theirs). The grouping follows the readers' rules
(``loose_runs`` and ``TIMELINE`` in ``traceql.sources``): a `traceql collect` run folder is one run;
loose nsys exports whose names share a stem and carry distinct rank numbers (``gpt2_rank0.sqlite``,
``gpt2_rank1.sqlite``) are one run (those of each folder, where two folders hold the same names); loose
torch.profiler traces given together are one run, as the Kineto reader makes them; any other loose file is
a run of its own. Nsight Compute CSVs hold no timeline: they go with the first run.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Sequence
from pathlib import Path

from traceql.sources import inputs, registry
from traceql.sources.files import InputFile

WITH_FIRST = "with the first run"  # the run key of files that hold no timeline


def split_runs(paths: str | Path | Sequence[str | Path] | None) -> list[list[Path] | None]:
    """The inputs of each run, in the order given: what :func:`traceql.labelling.read_timeline` reads for
    it. One run gets ``paths`` itself (None: the embedded example). Every file's header is checked first."""
    given = [paths] if isinstance(paths, (str, Path)) else list(paths or [])
    files = inputs.resolve(given or None)
    if len(files) == 1:
        return [None if not given else [Path(p) for p in given]]
    given = given or [inputs.DEFAULT_TRACE]
    groups: dict[Hashable, list[Path]] = {}
    folders = {Path(p).resolve(): Path(p) for p in given if Path(p).is_dir()}
    keys = _run_keys(files)
    for f in files:
        given_as = f.path  # a run folder's files are given as the folder, as the user named it
        if f.run is not None:
            given_as = next(folders[d] for d in (f.path.resolve(), *f.path.resolve().parents) if d in folders)
        group = groups.setdefault(keys[f.path], [])
        if given_as not in group:
            group.append(given_as)
    with_first = groups.pop(WITH_FIRST, [])
    runs = list(groups.values()) or [[]]
    runs[0].extend(with_first)
    if len(runs) == 1:
        return [None if not paths else [Path(p) for p in given]]
    return list(runs)


SINGLE = re.compile(r"[_-]single(?:[_-]|\.|$)", re.IGNORECASE)  # a name an isolated run's export often has
TOOLS = {"nsys-sqlite": "Nsight Systems", "kineto-json": "torch.profiler", "ncu-csv": "Nsight Compute"}


def input_notes(paths: str | Path | Sequence[str | Path] | None) -> list[str]:
    """What the folders given (not `traceql collect` run folders) call for saying: traces of more than one
    profiler (each profiler's become runs of their own), and isolated runs (``*_single``) among the others,
    which could be their baseline; and loose traces given together that a reader splits into several runs (of
    different jobs: ``loose_note``)."""
    notes = _loose_notes(paths)
    for folder in ([paths] if isinstance(paths, (str, Path)) else list(paths or [])):
        if not Path(folder).is_dir():
            continue
        files = inputs.resolve([folder])
        single = [f.path.name for f in files if f.run is None and SINGLE.search(f.path.name)]
        if single and len(single) < len([f for f in files if f.run is None]):
            one = len(single) == 1
            notes.append(f"note: {folder}: {', '.join(single)} "
                         + ("looks like an isolated run (*_single), labelled here as a run of its own; to label "
                            "the others against it, give it with --baseline" if one else
                            "look like isolated runs (*_single), each labelled here as a run of its own; to label "
                            "the others against them, give them with --baseline"))
        order = [*TOOLS, *sorted({f.fmt for f in files} - set(TOOLS))]
        tools = sorted({f.fmt for f in files if f.run is None}, key=order.index)
        if len(tools) > 1:
            held = ", ".join(f"{TOOLS.get(t, t)} {sum(f.fmt == t for f in files)}" for t in tools)
            ncu = " (an Nsight Compute CSV is no timeline: give it to detect with --metrics)" \
                if "ncu-csv" in tools else ""
            notes.append(f"note: {folder}: traces of several profilers ({held}) are not one run: each "
                         f"profiler's timelines are taken as runs of their own, their totals not added{ncu}")
    return notes


def _loose_notes(paths: str | Path | Sequence[str | Path] | None) -> list[str]:
    """Each reader's note on the loose files given (``loose_note``), where it has one."""
    given = [paths] if isinstance(paths, (str, Path)) else list(paths or [])
    loose: dict[str, list[Path]] = {}
    for f in inputs.resolve(given) if given else []:
        if f.run is None:
            loose.setdefault(f.fmt, []).append(f.path)
    said = [getattr(registry.reader(fmt), "loose_note", lambda _: None)(mine) for fmt, mine in loose.items()]
    return [s for s in said if s]


def _run_keys(files: list[InputFile]) -> dict[Path, Hashable]:
    """Each file's run, as a key the files of one run share: files without a timeline go with the first run,
    a run folder's files are its run, loose files are grouped by their reader (``loose_runs``) or alone."""
    keys: dict[Path, Hashable] = {}
    loose: dict[str, list[Path]] = {}
    for f in files:
        if not getattr(registry.reader(f.fmt), "TIMELINE", True):
            keys[f.path] = WITH_FIRST
        elif f.run is not None:
            keys[f.path] = ("folder", f.run)
        else:
            loose.setdefault(f.fmt, []).append(f.path)
    for fmt, mine in loose.items():
        reader = registry.reader(fmt)
        runs = reader.loose_runs(mine) if hasattr(reader, "loose_runs") else []
        keys.update({p: ("loose", fmt, i) for i, run in enumerate(runs) for p in run})
        keys.update({p: ("alone", p) for p in mine if p not in keys})
    return keys
