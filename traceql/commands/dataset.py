"""`traceql dataset add | build | summary`: label runs and traces into one parquet dataset.

    from traceql.commands import dataset
    dataset.add("slowdowns/", ["runs/gpt2-cap2", "ddp.sqlite"], baselines=["single.sqlite"])
    dataset.build("sweep.json", "slowdowns/")     # collect a sweep of configurations, then add it
    dataset.summary("slowdowns/")                 # cases, time lost, ratio distribution per model/config
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from traceql.dataset import build as sweep
from traceql.dataset.entries import Outcome
from traceql.dataset.store import Dataset
from traceql.parallel import Progress, check

if TYPE_CHECKING:  # the analysis stack loads to label, not for `dataset build --collect-only`
    import polars as pl

__all__ = ["Outcome", "add", "build", "summary"]


def add(root: str | Path, paths: Sequence[str | Path], *, baselines: Sequence[str | Path] = (),
        model: str | None = None, config: str | None = None, workers: int = 1, scheduler: str | None = None,
        progress: Progress | None = None) -> list[Outcome]:
    """Add run folders or traces to the dataset at ``root``; each is one entry, paired with the baseline it
    matches best. A failure does not stop the others; it is reported in the returned outcomes. OptionError,
    before anything is read or written, when ``root`` is (inside) one of the sources or baselines, or for
    ``workers`` and ``scheduler`` both given. The sources are labelled in ``workers`` local processes, or on
    the Dask scheduler at ``scheduler`` (``traceql.parallel``); ``progress(done, total, source)`` follows
    them; the entries are recorded in the order given, whatever order they finish in.

    Args:
        root: the dataset folder (created if missing).
        paths: the run folders or traces to add, one entry each; one already in the dataset is skipped.
        baselines: isolated runs to pair with: each source gets the one whose kernel signatures it matches best
            (none, or none that matches: its own isolated steps, else the detector).
        model: the model name of every entry (default: a run folder's input folder, else the trace's name).
        config: the configuration name of every entry (default: a run folder's ``ws<N>_cap<MB>_bs<B>``, else
            ``trace``).
        workers: how many local processes label the sources (1: one after another, in this process).
        scheduler: the address of a Dask scheduler (``tcp://host:8786``) whose workers label them instead.
        progress: called as ``progress(done, total, source)`` as each source is labelled.

    Returns:
        One outcome per source, in the order given: added, skipped or failed, with its rows, cases and time
        lost.

    Raises:
        OptionError: for ``root`` (inside) a source or baseline, or ``workers`` and ``scheduler`` both given.
    """
    from traceql.dataset.add import BaselinePicker, Shared, Source, add_all, refuse_root_inside

    check(workers, scheduler)
    refuse_root_inside(root, [*paths, *baselines])
    ds = Dataset(root)
    ds.prepare()  # what interrupted writers left goes first
    try:
        shared = Shared(BaselinePicker(baselines), ds.recorded())  # each baseline read once, here
        sources = [Source(Path(p), model=model, config=config) for p in paths]
        return [out for _, out in add_all(ds, sources, shared, workers=workers, scheduler=scheduler,
                                          progress=progress)]
    finally:
        ds.discard_if_unused()  # nothing added to a new folder: no folder left behind


def build(sweep_path: str | Path, root: str | Path, *, collect_only: bool = False, workers: int = 1,
          scheduler: str | None = None, progress: Progress | None = None) -> list[Outcome]:
    """Collect every configuration of a sweep (and its isolated run), one after another here, then label it
    and add it (the labelling in parallel where asked, as in :func:`add`); resumable.

    Args:
        sweep_path: the sweep file (SWEEP.json): input folders × a grid of local_config values.
        root: the dataset folder; the runs are collected into its ``runs/``.
        collect_only: collect the runs and label nothing (a later ``build`` labels what it finds).
        workers: how many local processes label the collected configurations.
        scheduler: the address of a Dask scheduler whose workers label them instead.
        progress: called as ``progress(done, total, what)`` as each configuration is collected, skipped,
            labelled or fails.

    Returns:
        One outcome per configuration: added, skipped (already there), collected (``collect_only``) or failed.
    """
    return sweep.build(sweep_path, root, collect_only=collect_only, workers=workers, scheduler=scheduler,
                       progress=progress)


def summary(root: str | Path) -> pl.DataFrame:
    """Per model and configuration: entries, kernel rows, cases, time lost, slowdown ratio distribution.

    Args:
        root: the dataset folder.

    Returns:
        One row per model and configuration: entries, rows, cases, undecided rows (``is_slowdown`` null), the
        cases' share of the decided rows, time lost, median / p90 / max slowdown ratio of the cases.
    """
    from traceql.dataset.summary import summary as summarize

    return summarize(root)
