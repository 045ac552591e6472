"""The ground-truth matrix (``datasets/groundtruth/``): real runs we collected, with their counterfactuals.

    >>> from traceql.validation import load_matrix
    >>> m = load_matrix()
    >>> cfg = m.configurations()[0]              # (GPU kind, model, GPUs, bucket cap)
    >>> traceql.detect(cfg.stock[0].path(), baseline=[cfg.twin.path()])
    >>> cfg.serial[0].step_ms()                  # the measured step of the serialized counterfactual

Each run folder is a ``traceql collect`` run folder whose exports are xz-compressed (``traces/*.sqlite.xz``);
:meth:`MatrixRun.path` unpacks one once into a cache (``$TRACEQL_CACHE``, else ``~/.cache/traceql``) and returns
a folder every command reads. Run names: ``<model>-<g>g-cap<cap>-<role>[-r<k>]`` and ``<model>-twin``; roles:
``stock``, ``serial`` (``comm=serial``), ``alt`` (``comm=alternate``: stock and serialized steps alternating),
``cpu-straggler``, ``gpu-delay``.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import os
import re
import shutil
import statistics
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from traceql.errors import InputError

NAME = re.compile(r"^(?P<model>[a-z0-9]+)-(?:twin|(?P<world>\d+)g-cap(?P<cap>\d+)-(?P<role>[a-z-]+?)"
                  r"(?:-r(?P<rep>\d+))?)$")
ROLES = ("stock", "serial", "alt", "cpu-straggler", "gpu-delay")
STEPS_FILE = "steps.json"  # a light run's measured steps (``bench/groundtruth/lighten.py``)


class Predicted:
    """A what-if's answer against the real run of its counterfactual (ns): its relative error, and the change
    it predicts from the step it starts from against the change the real run shows (:meth:`before`)."""

    predicted_ns: float
    measured_ns: float

    def before(self) -> tuple[float, float]:
        """The steps the predicted and the real change are measured from."""
        raise NotImplementedError

    @property
    def error(self) -> float:
        """(predicted - measured) / measured."""
        return (self.predicted_ns - self.measured_ns) / self.measured_ns

    @property
    def change_predicted_ns(self) -> float:
        return self.predicted_ns - self.before()[0]

    @property
    def change_real_ns(self) -> float:
        return self.measured_ns - self.before()[1]


def default_root() -> Path:
    """``datasets/groundtruth`` of the installed package or of the source checkout."""
    package = Path(__file__).resolve().parents[1]
    inside = package / "datasets" / "groundtruth"
    return inside if inside.is_dir() else package.parent / "datasets" / "groundtruth"


def cache_root() -> Path:
    return Path(os.environ.get("TRACEQL_CACHE") or Path.home() / ".cache" / "traceql") / "groundtruth"


@dataclass(frozen=True)
class MatrixRun:
    """One run of the matrix: where it is shipped and what it is."""

    folder: Path
    gpu: str  # the host batch's folder: the GPU kind, then which host of that kind (``h100-a``)
    model: str
    role: str  # twin, stock, serial, alt, cpu-straggler, gpu-delay
    world: int = 1
    cap: int | None = None
    repeat: int = 1

    @property
    def name(self) -> str:
        return self.folder.name

    @property
    def kind(self) -> str:
        """The GPU kind (``h100``) of the host batch the run belongs to."""
        return self.gpu.split("-")[0]

    @property
    def label(self) -> str:
        """``<host batch>/<run name>``: unique over the matrix (a configuration may run on several hosts)."""
        return f"{self.gpu}/{self.name}"

    @property
    def manifest(self) -> dict[str, Any]:
        return json.loads((self.folder / "manifest.json").read_text())

    def results(self) -> list[dict[str, Any]]:
        """Each rank's result (``results/rank<r>.json``), in rank order."""
        files = sorted(self.folder.glob("results/rank*.json"), key=lambda p: int(p.stem[4:]))
        return [json.loads(p.read_text()) for p in files]

    def step_ms(self, *, steps: set[int] | None = None, skip_first: bool = True) -> float:
        """The run's measured step (ms): per window step the slowest rank's wall time (the ranks synchronize
        at each step's end), the median over the window's normal steps (its first, the capture's start, left
        out with ``skip_first``); ``steps`` keeps only those step numbers."""
        per_step: dict[int, float] = {}
        for result in self.results():
            for t in result.get("step_times_ms", []):
                if t.get("window") and not t.get("isolated"):
                    per_step[t["step"]] = max(per_step.get(t["step"], 0.0), t["ms"])
        keys = sorted(per_step)[1:] if skip_first else sorted(per_step)
        chosen = [per_step[k] for k in keys if steps is None or k in steps]
        return statistics.median(chosen) if chosen else float("nan")

    @property
    def light(self) -> bool:
        """A repeat shipped with its measured step times alone (``steps.json``), its traces left out."""
        return (self.folder / STEPS_FILE).is_file() and not any(self.folder.glob("traces/*.sqlite.xz"))

    def shipped_steps(self) -> list[dict[str, Any]]:
        """A light run's steps as measured from its traces when it was collected (``steps.json``)."""
        return json.loads((self.folder / STEPS_FILE).read_text())["steps"]

    def injected(self) -> dict[str, Any] | None:
        """The straggler or GPU delay this run's local_config injected (rank, steps, length), else None."""
        local = self.manifest["input"]["local_config"]
        return local.get("gpu_delay") or local.get("straggler")

    def path(self) -> Path:
        """A readable run folder: the shipped one with its exports unpacked, once, into the cache."""
        packed = sorted(self.folder.glob("traces/*.sqlite.xz"))
        digest = hashlib.sha256()
        for p in [self.folder / "manifest.json", *packed]:
            digest.update(p.name.encode())
            digest.update(p.read_bytes())
        dest = cache_root() / self.gpu / f"{self.name}-{digest.hexdigest()[:12]}"
        if dest.is_dir():
            return dest / self.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".unpack-", dir=dest.parent))
        try:
            run = tmp / self.name
            shutil.copytree(self.folder, run, ignore=shutil.ignore_patterns("*.xz"))
            for p in packed:
                with lzma.open(p) as src, (run / "traces" / p.name[:-3]).open("wb") as dst:
                    shutil.copyfileobj(src, dst)
            os.replace(tmp, dest)  # a reader sees the folder whole or not at all
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return dest / self.name


@dataclass
class Configuration:
    """(GPU kind, model, GPUs, bucket cap): its stock and serialized runs and the model's isolated twin."""

    gpu: str
    model: str
    world: int
    cap: int
    stock: list[MatrixRun] = field(default_factory=list)
    serial: list[MatrixRun] = field(default_factory=list)
    twin: MatrixRun | None = None

    @property
    def name(self) -> str:
        return f"{self.gpu} {self.model} {self.world}g cap{self.cap}"


@dataclass
class Pooled(Configuration):
    """A :class:`Configuration` over every host of its GPU kind (``gpu``: the kind, ``h100``): every stock and
    serialized run, light repeats included (what was measured), and ``traced``, the stock runs with traces
    (what the what-if is asked about)."""

    traced: list[MatrixRun] = field(default_factory=list)


@dataclass
class Matrix:
    """Every run of the matrix with its traces (``runs``), the light repeats (``repeats``: measured step times
    alone), and the labels shipped beside them."""

    root: Path
    runs: list[MatrixRun]
    repeats: list[MatrixRun] = field(default_factory=list)

    def run(self, name: str, gpu: str | None = None) -> MatrixRun:
        for r in self.runs:
            if r.name == name and gpu in (None, r.gpu):
                return r
        raise KeyError(name)

    def twin(self, gpu: str, model: str) -> MatrixRun | None:
        return next((r for r in self.runs if r.gpu == gpu and r.model == model and r.role == "twin"), None)

    def configurations(self) -> list[Configuration]:
        """Every (GPU kind, model, GPUs, cap) with a stock run, in name order."""
        out: dict[tuple, Configuration] = {}
        for r in sorted(self.runs, key=lambda r: (r.gpu, r.model, r.world, r.cap or 0, r.repeat)):
            if r.role in ("stock", "serial"):
                key = (r.gpu, r.model, r.world, cast(int, r.cap))  # a stock or serialized run's name has its cap
                cfg = out.setdefault(key, Configuration(*key, twin=self.twin(r.gpu, r.model)))
                getattr(cfg, r.role).append(r)
        return [c for c in out.values() if c.stock]

    def pooled(self) -> list[Pooled]:
        """Every (GPU kind, model, GPUs, cap) with a traced stock run and a serialized run, its runs of every
        host of the kind together, in name order."""
        out: dict[tuple, Pooled] = {}
        for r in sorted(self.runs + self.repeats, key=lambda r: (r.kind, r.model, r.world, r.cap or 0, r.label)):
            if r.role in ("stock", "serial"):
                p = out.setdefault((r.kind, r.model, r.world, r.cap), Pooled(r.kind, r.model, r.world, r.cap or 0))
                getattr(p, r.role).append(r)
                if r.role == "stock" and not r.light:
                    p.traced.append(r)
        return [p for p in out.values() if p.traced and p.serial]

    def injected(self, role: str) -> list[MatrixRun]:
        """The runs of one counterfactual role (``cpu-straggler``, ``gpu-delay``, ``alt``)."""
        return [r for r in self.runs if r.role == role]

    def labels_path(self, run: MatrixRun) -> Path:
        """The twin labels shipped for a stock run (parquet)."""
        return self.root / run.gpu / "labels" / f"{run.name}.parquet"


def family(model: str) -> str:
    """The model a run's model name is a batch of (``resnet50b32`` is ResNet-50): what leave-one-out holds out."""
    return re.sub(r"b\d+$", "", model)


def load_matrix(root: str | Path | None = None) -> Matrix:
    """The matrix under ``root`` (default: the shipped ``datasets/groundtruth``): one folder per host batch
    (``<GPU kind>-<host>``, e.g. ``h100-a``), one run folder per run. InputError when there is none."""
    base = Path(root) if root is not None else default_root()
    if not base.is_dir():
        raise InputError("no ground-truth matrix here (it ships in the source repository's datasets/groundtruth)",
                         path=str(base))
    runs = []
    for gpu_dir in sorted(p for p in base.iterdir() if p.is_dir()):
        for folder in sorted(p for p in gpu_dir.iterdir() if (p / "manifest.json").is_file()):
            m = NAME.match(folder.name)
            if m is None:
                raise InputError("a run folder whose name the matrix does not know", path=str(folder))
            role = m["role"] or "twin"
            if role not in (*ROLES, "twin"):
                raise InputError(f"unknown role {role!r} in a run folder's name", path=str(folder))
            runs.append(MatrixRun(folder, gpu_dir.name, m["model"], role, int(m["world"] or 1),
                                  int(m["cap"]) if m["cap"] else None, int(m["rep"] or 1)))
    if not runs:
        raise InputError("no run folders in the ground-truth matrix", path=str(base))
    return Matrix(base, [r for r in runs if not r.light], [r for r in runs if r.light])
