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

from traceql.dataset.entries import Outcome, remove_tree
from traceql.dataset.store import Dataset
from traceql.errors import CollectFailed, InputError, TraceqlError
from traceql.parallel import Progress, check

SWEEP_KEYS = {"inputs", "grid", "profiler", "metrics", "steps", "timeout", "device"}
GRID_KEYS = {"world_size", "cap_size", "epochs", "batchsize"}
NOT_SHAPE = {"world_size", "cap_size"}  # keys an isolated run does not depend on


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


def load_sweep(path: str | Path) -> Sweep:
    path = Path(path)
    try:
        spec = json.loads(path.read_text())
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path=str(path)) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON ({exc.msg} at line {exc.lineno})", path=str(path)) from None
    if not isinstance(spec, dict) or "inputs" not in spec:
        raise InputError('a sweep is a JSON object with "inputs" (and "grid", "profiler", ...)', path=str(path))
    unknown = set(spec) - SWEEP_KEYS
    if unknown:
        raise InputError(f"unknown key(s) {', '.join(sorted(unknown))}; allowed: {', '.join(sorted(SWEEP_KEYS))}",
                         path=str(path))
    grid = spec.get("grid", {})
    bad = set(grid) - GRID_KEYS
    if bad or not all(isinstance(v, list) and v for v in grid.values()):
        raise InputError(f"grid: keys must be among {', '.join(sorted(GRID_KEYS))}, each with a non-empty list",
                         path=str(path))
    if spec.get("profiler", "nsys") not in ("nsys", "torch"):
        raise InputError("profiler: nsys or torch (the timeline the labels come from)", path=str(path))
    if not isinstance(spec["inputs"], list) or not all(isinstance(p, str) for p in spec["inputs"]):
        raise InputError('inputs: a list of input folders ("../gpt2")', path=str(path))
    for key, kind, what in (("steps", int, "a whole number of steps"), ("timeout", (int, float), "seconds"),
                            ("metrics", bool, "true or false"), ("device", str, "auto, cuda or cpu")):
        value = spec.get(key)
        if value is not None and (not isinstance(value, kind) or isinstance(value, bool) and kind is not bool):
            raise InputError(f"{key}: {json.dumps(value)} is not {what}", path=str(path))
    sweep = Sweep([(path.parent / p).resolve() for p in spec["inputs"]], grid,
                  spec.get("profiler", "nsys"), bool(spec.get("metrics", False)), int(spec.get("steps", 5)),
                  spec.get("timeout", 1800), spec.get("device", "auto"))
    keys = sorted(grid)
    for folder in sweep.inputs:
        for values in itertools.product(*(grid[k] for k in keys)):
            sweep.configs.append((folder, dict(zip(keys, values, strict=True))))
    return sweep


def _label(overrides: dict[str, Any]) -> str:
    return "_".join(f"{k}{v}" for k, v in sorted(overrides.items())) or "default"


def _collect(sweep: Sweep, folder: Path, overrides: dict[str, Any], run: Path, profiler: str,
             ranks: list[int] | None = None) -> Path:
    """Collect into ``run`` unless a finished collection is there already (then reuse it)."""
    from traceql.collecting import collect_errors, run_collection
    from traceql.collectors import manifest
    from traceql.collectors.launch import LaunchOptions
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

    if collect_only:
        list(collected())
    else:
        from traceql.dataset.add import BaselinePicker, Shared, add_all

        shared = Shared(BaselinePicker([]), set())  # each configuration brings its own isolated run
        for source, outcome in add_all(ds, collected(), shared, workers=workers, scheduler=scheduler,
                                       progress=step.labelled):
            outcomes[where[source.name]] = outcome
    step("done")
    return [outcomes[i] for i in range(len(sweep.configs))]
