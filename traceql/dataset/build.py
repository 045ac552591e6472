"""`traceql dataset build`: collect a sweep of configurations (and the isolated runs they need), label them.

SWEEP.json::

    {"inputs": ["datasets/examples/gpt2"],            input folders (relative to the sweep file)
     "grid": {"cap_size": [2, 25], "batchsize": [8, 16]},   local_config values to combine
     "profiler": "nsys",                              the timeline profiler: nsys or torch
     "metrics": false,                                also an ncu collection per configuration (rank 0)
     "steps": 5, "timeout": 1800, "device": "auto"}

Every run lands in DIR/runs/<name>; a run that finished is reused, so an interrupted build resumes where it
stopped. Each configuration's isolated run (world_size 1, same shapes) is collected once and shared.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from traceql.collectors.errors import CollectError
from traceql.collectors.fields import Field, integer, list_of, number, obj, of_type, one_of
from traceql.collectors.fields import check as check_fields
from traceql.collectors.launch_options import DEVICES
from traceql.dataset.entries import Outcome, remove_tree
from traceql.dataset.store import Dataset
from traceql.errors import CollectFailed, InputError, TraceqlError
from traceql.jsonfile import load_json
from traceql.parallel import Progress, check
from traceql.sources.outputs import check_folder_output

GRID = {"world_size": integer(1), "cap_size": number(0, above=True), "epochs": integer(1), "batchsize": integer(1)}
NOT_SHAPE = {"world_size", "cap_size"}  # keys an isolated run does not depend on
PROFILERS = ("nsys", "torch")  # the timeline profilers a sweep's labels come from
SWEEP = {"inputs": list_of(Field("a folder name", lambda v: isinstance(v, str) and bool(v.strip())
                                 and "\x00" not in v), least=1),
         "grid": obj({k: list_of(f, least=1) for k, f in GRID.items()}, partial=True),
         "profiler": one_of(*PROFILERS), "metrics": of_type("true or false", bool), "steps": integer(1),
         "timeout": number(0, above=True, null=True), "device": one_of(*DEVICES)}


@dataclass
class Sweep:
    inputs: list[Path]
    grid: dict[str, list[Any]]
    profiler: str = "nsys"
    metrics: bool = False
    steps: int = 5
    timeout: float | None = 1800
    device: str = "auto"
    configs: list[tuple[Path, dict[str, Any]]] = field(default_factory=list)


def _spec(path: Path) -> dict[str, Any]:
    """The sweep file's object, every key checked (:data:`SWEEP`); InputError naming the file and the key."""
    spec = load_json(path)
    if not isinstance(spec, dict) or "inputs" not in spec:
        raise InputError('a sweep is a JSON object with "inputs" (and "grid", "profiler", ...)', path=str(path))
    if unknown := sorted(set(spec) - set(SWEEP)):
        raise InputError(f"unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(SWEEP))}", path=str(path))
    grid = spec.get("grid", {})
    if isinstance(grid, dict) and (bad := sorted(set(grid) - set(GRID))):
        raise InputError(f"grid: unknown key(s) {', '.join(bad)}; keys must be among {', '.join(sorted(GRID))}, "
                         "each with a non-empty list", path=str(path))
    try:
        check_fields(spec, SWEEP, str(path), optional=True)
    except CollectError as exc:
        raise InputError(str(exc)) from None
    return spec


def _input(folder: Path, sweep_path: Path) -> Path:
    """An input folder of the sweep, checked now (its model and local_config): no configuration is collected
    from a sweep that names a folder it cannot run."""
    from traceql.collectors.config import load_input

    try:
        load_input(folder)
    except CollectError as exc:
        raise InputError(f"inputs: {exc}", path=str(sweep_path)) from None
    return folder


def load_sweep(path: str | Path) -> Sweep:
    """A sweep file, checked whole before anything runs: its keys, their types and ranges, its input folders
    and every configuration of its grid (each input's local_config with the grid's values)."""
    from traceql.collectors.config import load_input

    path = Path(path)
    spec = _spec(path)
    grid = spec.get("grid", {})
    sweep = Sweep([_input((path.parent / p).resolve(), path) for p in spec["inputs"]], grid,
                  spec.get("profiler", "nsys"), bool(spec.get("metrics", False)), int(spec.get("steps", 5)),
                  spec.get("timeout", 1800), spec.get("device", "auto"))
    keys = sorted(grid)
    for folder in sweep.inputs:
        for values in itertools.product(*(grid[k] for k in keys)):
            overrides = dict(zip(keys, values, strict=True))
            try:
                load_input(folder, overrides)
            except CollectError as exc:
                raise InputError(f"grid {json.dumps(overrides)}: {exc}", path=str(path)) from None
            sweep.configs.append((folder, overrides))
    return sweep


def _label(overrides: dict[str, Any]) -> str:
    return "_".join(f"{k}{v}" for k, v in sorted(overrides.items())) or "default"


def _collect(sweep: Sweep, folder: Path, overrides: dict[str, Any], run: Path, profiler: str,
             ranks: list[int] | None = None) -> Path:
    """Collect into ``run`` unless a finished collection is there already (then reuse it)."""
    from traceql.collecting import collect_errors, run_collection
    from traceql.collectors import manifest
    from traceql.collectors.launch_options import LaunchOptions
    from traceql.collectors.profilers import ProfilerOptions

    done = manifest.read(run)
    if done is not None and done.get("status") == "complete":
        return run
    if run.exists():
        remove_tree(run)  # an interrupted or failed attempt: start it again
    with collect_errors():
        opts = ProfilerOptions(name=profiler, steps=sweep.steps)
    run_collection(folder, opts, out=run, overrides=overrides,
                   launch=LaunchOptions(timeout=sweep.timeout, device=sweep.device, profile_ranks=ranks))
    return run


class _Progress:
    """A build's progress: configurations done (collected only, skipped, failed, or labelled) of all."""

    def __init__(self, total: int, report: Progress | None) -> None:
        self.total, self.report, self.done = total, report, 0

    def __call__(self, what: str, *, finished: bool = False) -> None:
        self.done += finished
        if self.report:
            self.report(self.done, self.total, what)

    def labelled(self, _done: int, _total: int | None, name: str) -> None:
        self(f"labelled {name}", finished=True)


def build(sweep_path: str | Path, root: str | Path, *, collect_only: bool = False, workers: int = 1,
          scheduler: str | None = None, progress: Progress | None = None) -> list[Outcome]:
    """Collect and label every configuration of a sweep into the dataset at ``root``. The collections run one
    after another in this process (they use the GPU); the labelling of each collected configuration runs in
    parallel where asked (``traceql.parallel``: it starts while the next configuration is collected)."""
    check(workers, scheduler)
    sweep = load_sweep(sweep_path)
    check_folder_output(root, "--out", inputs=sweep.inputs)  # never a dataset inside a model's input folder
    ds = Dataset(root)
    ds.prepare()  # what interrupted writers left goes first
    runs = Path(root) / "runs"
    outcomes: dict[int, Outcome] = {}
    where: dict[str, int] = {}  # a configuration to label: its name -> its place
    pickers: dict[Path, Any] = {}  # each isolated run is read once
    step = _Progress(len(sweep.configs), progress)

    def done(i: int, outcome: Outcome) -> None:
        outcomes[i] = outcome
        step(outcome.name, finished=True)

    def collected() -> Iterator[Any]:
        """The configurations to label, each as soon as it is collected (here, one after another)."""
        for i, (folder, overrides) in enumerate(sweep.configs):
            name = f"{folder.name}-{_label(overrides)}"
            step(f"collecting {name}")
            if ds.has(name):
                done(i, Outcome(name, "skipped", message="already in the dataset"))
                continue
            try:
                run = _collect(sweep, folder, overrides, runs / name, sweep.profiler)
                shape = {k: v for k, v in overrides.items() if k not in NOT_SHAPE}
                iso = _collect(sweep, folder, {**shape, "world_size": 1},
                               runs / f"{folder.name}-isolated-{_label(shape)}", sweep.profiler)
                metrics = [_collect(sweep, folder, overrides, runs / f"{name}-ncu", "ncu", [0])] if sweep.metrics \
                    else None
                if collect_only:
                    done(i, Outcome(name, "collected", message=f"{run} (label it by running build again)"))
                    continue
                from traceql.dataset.add import BaselinePicker, Source  # the analysis stack, only to label
                from traceql.labelling.inputs import read_metrics

                if iso not in pickers:
                    pickers[iso] = BaselinePicker([iso])
                source = Source(run, entry_id=name, metrics=read_metrics(metrics) if metrics else None,
                                picker=pickers[iso])
            except TraceqlError as exc:
                if isinstance(exc, CollectFailed) and exc.stage == "interrupted":  # Ctrl-C stops the whole build
                    raise
                done(i, Outcome(name, "failed", message=str(exc)))
                continue
            where[name] = i
            yield source

    try:
        if collect_only:
            list(collected())
        else:
            from traceql.dataset.add import BaselinePicker, Shared, add_all

            shared = Shared(BaselinePicker([]), set())  # each configuration brings its own isolated run
            for source, outcome in add_all(ds, collected(), shared, workers=workers, scheduler=scheduler,
                                           progress=step.labelled):
                outcomes[where[source.name]] = outcome
    finally:
        ds.discard_if_unused()  # nothing collected nor added into a new folder: no folder left behind
    step("done")
    return [outcomes[i] for i in range(len(sweep.configs))]
