"""`traceql dataset add | build | summary`: label runs and traces into one parquet dataset.

    from traceql.commands import dataset
    dataset.add("slowdowns/", ["runs/gpt2-cap2", "ddp.sqlite"], baselines=["single.sqlite"])
    dataset.build("sweep.json", "slowdowns/")     # collect a sweep of configurations, then add it
    dataset.summary("slowdowns/")                 # cases, time lost, ratio distribution per model/config
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from traceql.dataset import build as sweep
from traceql.dataset.store import Dataset, Outcome
from traceql.errors import TraceqlError

if TYPE_CHECKING:  # the analysis stack loads to label, not for `dataset build --collect-only`
    import polars as pl

__all__ = ["Outcome", "add", "build", "summary"]


def add(root: str | Path, paths: Sequence[str | Path], *, baselines: Sequence[str | Path] = (),
        model: str | None = None, config: str | None = None,
        progress: Callable[[str], None] | None = None) -> list[Outcome]:
    """Add run folders or traces to the dataset at ``root``; each is one entry, paired with the baseline it
    matches best. A failure does not stop the others; it is reported in the returned outcomes. OptionError,
    before anything is read or written, when ``root`` is (inside) one of the sources or baselines."""
    from traceql.dataset.add import BaselinePicker, add_one, refuse_root_inside

    refuse_root_inside(root, [*paths, *baselines])
    ds = Dataset(root)
    ds.prepare()  # what interrupted writers left goes first
    picker = BaselinePicker(baselines)
    out = []
    for path in map(Path, paths):
        if progress:
            progress(str(path))
        try:
            out.append(add_one(ds, path, picker, model=model, config=config))
        except TraceqlError as exc:
            out.append(Outcome(str(path), "failed", message=str(exc)))
    return out


def build(sweep_path: str | Path, root: str | Path, *, collect_only: bool = False,
          progress: Callable[[str, int, int], None] | None = None) -> list[Outcome]:
    """Collect every configuration of a sweep (and its isolated run), label it and add it; resumable."""
    return sweep.build(sweep_path, root, collect_only=collect_only, progress=progress)


def summary(root: str | Path) -> pl.DataFrame:
    """Per model and configuration: entries, kernel rows, cases, time lost, slowdown ratio distribution."""
    from traceql.dataset.summary import summary as summarize

    return summarize(root)
