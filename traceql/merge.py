"""Several runs given together: which input files form each run, and one result from the runs' own.

`detect` labels each run on its own (its timeline read alone, its detector fitted on it alone), so that the
runs can be labelled in parallel and a run's labels never depend on what else was given with it. The
grouping follows the readers' rules (``traceql.sources``): a `traceql collect` run folder is one run;
loose nsys exports whose names share a stem and carry distinct rank numbers (``gpt2_rank0.sqlite``,
``gpt2_rank1.sqlite``) are one run (those of each folder, where two folders hold the same names); loose
torch.profiler traces given together are one run, as the Kineto reader makes them; any other loose file is
a run of its own. Nsight Compute CSVs hold no timeline: they go with the first run.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from traceql.sources import inputs
from traceql.sources.ranks import RANK_IN_NAME, rank_from_name


def _stem(path: Path) -> str:
    """A per-rank file's name without its rank, as ``sources.ranks.run_name`` reads it."""
    return RANK_IN_NAME.sub("", path.name.split(".")[0]).strip("_-.")


def split_runs(paths: str | Path | Sequence[str | Path] | None) -> list[list[Path] | None]:
    """The inputs of each run, in the order given: what :func:`traceql.labelling.inputs.read_timeline` reads for
    it. One run gets ``paths`` itself (None: the embedded example). Every file's header is checked first."""
    given = [paths] if isinstance(paths, (str, Path)) else list(paths or [])
    files = inputs.resolve(given or None)
    if len(files) == 1:
        return [None if not given else [Path(p) for p in given]]
    given = given or [inputs.DEFAULT_TRACE]
    groups: dict[tuple[str, ...], list[Path]] = {}
    folders = {Path(p).resolve(): Path(p) for p in given if Path(p).is_dir()}
    ncu: list[Path] = []
    ranks_of = _per_rank_runs([f.path for f in files if f.run is None and f.fmt == "nsys-sqlite"])
    for f in files:
        given_as = f.path  # a run folder's files are given as the folder, as the user named it
        if f.run is not None:
            given_as = next(folders[d] for d in (f.path.resolve(), *f.path.resolve().parents) if d in folders)
        if f.fmt == "ncu-csv":
            key: tuple[str, ...] = ("ncu",)
        elif f.run is not None:
            key = ("run", f.run)
        elif f.fmt == "kineto-json":
            key = ("kineto",)
        elif f.path in ranks_of:
            key = ranks_of[f.path]
        else:
            key = ("file", str(f.path))
        group = ncu if key == ("ncu",) else groups.setdefault(key, [])
        if given_as not in group:
            group.append(given_as)
    runs = list(groups.values()) or [[]]
    runs[0].extend(ncu)
    if len(runs) == 1:
        return [None if not paths else [Path(p) for p in given]]
    return list(runs)


def _per_rank_runs(loose: list[Path]) -> dict[Path, tuple[str, ...]]:
    """The loose exports that form a run with others (names with one stem and distinct ranks: first across
    folders, else within each folder), each with its run's key."""
    out: dict[Path, tuple[str, ...]] = {}
    by_stem: dict[str, list[Path]] = {}
    for p in loose:
        by_stem.setdefault(_stem(p), []).append(p)
    for stem, group in by_stem.items():
        if _is_one_run(group):
            out.update((p, ("ranks", stem)) for p in group)
            continue
        by_folder: dict[Path, list[Path]] = {}
        for p in group:
            by_folder.setdefault(p.resolve().parent, []).append(p)
        for folder, mine in by_folder.items():
            if _is_one_run(mine):
                out.update((p, ("ranks", stem, str(folder))) for p in mine)
    return out


def _is_one_run(files: list[Path]) -> bool:
    ranks = [rank_from_name(p) for p in files]
    return len(files) > 1 and None not in ranks and len(set(ranks)) == len(files)
