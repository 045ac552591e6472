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

import polars as pl

from traceql.labelling import DetectResult
from traceql.sources import inputs
from traceql.sources.ranks import RANK_IN_NAME, rank_from_name

MODES = ("baseline", "inrun", "detector")


def _stem(path: Path) -> str:
    """A per-rank file's name without its rank, as ``sources.ranks.run_name`` reads it."""
    return RANK_IN_NAME.sub("", path.name.split(".")[0]).strip("_-.")


def split_runs(paths: str | Path | Sequence[str | Path] | None) -> list[list[Path] | None]:
    """The inputs of each run, in the order given: what :func:`traceql.labelling.read_timeline` reads for
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


def _renamed(result: DetectResult, used: set[str]) -> DetectResult:
    """A run whose run id an earlier run has already (two ``x.sqlite`` from two folders) becomes ``x#2``."""
    names: dict[str, str] = {}
    for run_id in result.ranks["run_id"].unique(maintain_order=True).to_list():
        name, n = run_id, 2
        while name in used:
            name, n = f"{run_id}#{n}", n + 1
        used.add(name)
        names[run_id] = name
    if all(k == v for k, v in names.items()):
        return result
    frames = [df.with_columns(pl.col("run_id").replace(names)) if "run_id" in df.columns else df
              for df in (result.ranks, result.top_signatures, result.kernels, result.steps)]
    return DetectResult(ranks=frames[0], top_signatures=frames[1], kernels=frames[2], mode=result.mode,
                        match_rate=result.match_rate, notes=result.notes,
                        metrics_match_rate=result.metrics_match_rate, steps=frames[3])


def _mode(modes: list[str]) -> str:
    labelled = {m for m in modes if m != "none"}
    if not labelled:
        return "none"
    if len(labelled) == 1:
        return labelled.pop()
    return "baseline" if "baseline" in labelled else "inrun+detector"


def _weighted(rates: list[tuple[float | None, int]]) -> float | None:
    known = [(r, n) for r, n in rates if r is not None]
    weight = sum(n for _, n in known)
    return sum(r * n for r, n in known) / weight if weight else None


def merge(results: list[DetectResult], *, top: int = 10) -> DetectResult:
    """One result from the runs' results, in the order given: ranks, steps and kernels one after another,
    the ``top`` slowed signatures of them all, notes once each. The baseline match rate is weighted by each
    run's compute kernels; the Nsight Compute match rate (a share of the profiled launches, which every run
    is matched with) is their mean."""
    if len(results) == 1:
        return results[0]
    used: set[str] = set()
    results = [_renamed(r, used) for r in results]
    tops = pl.concat([r.top_signatures for r in results], how="diagonal_relaxed")
    tops = tops.sort(["time_lost_ns", "run_id", "signature"], descending=[True, False, False]).head(top)
    metrics = [r.metrics_match_rate for r in results if r.metrics_match_rate is not None]
    notes = list(dict.fromkeys(n for r in results for n in r.notes))
    return DetectResult(
        ranks=pl.concat([r.ranks for r in results], how="diagonal_relaxed"),
        top_signatures=tops,
        kernels=pl.concat([r.kernels for r in results], how="diagonal_relaxed"),
        mode=_mode([r.mode for r in results]),
        match_rate=_weighted([(r.match_rate, r.kernels.height) for r in results]),
        notes=notes,
        metrics_match_rate=sum(metrics) / len(metrics) if metrics else None,
        steps=pl.concat([r.steps for r in results], how="diagonal_relaxed"),
    )
