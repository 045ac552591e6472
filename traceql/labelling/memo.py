"""What a command computed of a run, kept in the cache beside the exports' copies (``sources.mirror``), so that
the same command on the same files with the same options answers at once.

An entry is found by a key (:func:`key`) made of what was computed, the options, the identity of every input
file as it is now (its size, modification time and a hash of its first and last bytes: ``mirror.identity``),
the ``TRACEQL_*`` settings, the versions of the libraries the figures come from and a hash of traceql's own
code: a file rewritten, another traceql or another option is a miss, never a stale answer.

    got = load(k)                          # None: not computed yet (or the cache is off)
    if got is None:
        got = compute(); save(k, got, "detect: run.sqlite")

An entry is a folder like a copy's (a manifest, so that ``cache info``, ``clear`` and the eviction count it):
its frames as zstd Arrow files, labelled rows stored a rank at a time (``StoredRows``) as their parquet files,
a run's stored activities (``replay.Stored``) as their Arrow files, the rest pickled. It is written into a
temporary folder and renamed into place; read back, only the classes of traceql, its analyzers, polars and
Python's containers are made (a pickle names what it builds). ``--no-cache`` or ``TRACEQL_NO_CACHE=1`` turns
it off with the copies; ``TRACEQL_NO_RESULT_CACHE=1`` alone.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import io
import json
import os
import pickle
import shutil
import tempfile
import time
from collections import deque
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from traceql.analyzers.replay.stored import Stored
from traceql.labelling.result import StoredRows
from traceql.sources import mirror

OFF_ENV = "TRACEQL_NO_RESULT_CACHE"
PREFIX = "result-"  # an entry's folder: PREFIX + its key (a copy's is the export's identity alone)
# settings that change where or whether things are kept, not what is computed
_NOT_KEYED = {mirror.DIR_ENV, mirror.OFF_ENV, mirror.LIMIT_ENV, OFF_ENV, "TRACEQL_SCRATCH", "TRACEQL_DEBUG"}
_LIBRARIES = ("polars", "duckdb", "numpy", "scikit-learn", "pyarrow")
_MODULES = ("traceql.", "analyzers.", "collectors.", "polars.", "pathlib", "collections", "datetime")
_BUILTINS = {"set", "frozenset", "list", "dict", "tuple", "slice", "complex", "range", "bytearray", "object"}


_served: deque[float] = deque(maxlen=64)  # when the results this process was served were computed (epoch s)
_labels: deque[float] = deque(maxlen=64)  # ... and the labels it started from (``labelling.reused``)
_replays: deque[float] = deque(maxlen=64)  # ... and another command's replay of them (``verdicts.kept_replay``)


def served() -> list[float]:
    """When each result this process was served since the last call was computed (epoch seconds)."""
    out = list(_served)
    _served.clear()
    return out


def labels_served() -> list[float]:
    """When the labels this process started from since the last call (``load(k, labels=True)``) were made."""
    out = list(_labels)
    _labels.clear()
    return out


def replays_served() -> list[float]:
    """When the replays this process started from since the last call (``load(k, replay=True)``) were made."""
    out = list(_replays)
    _replays.clear()
    return out


def enabled() -> bool:
    """Whether results are kept and served (off with the copies, or alone with ``TRACEQL_NO_RESULT_CACHE``)."""
    return mirror.enabled() and os.environ.get(OFF_ENV, "").strip().lower() in ("", "0", "false", "no")


@functools.cache
def code() -> str:
    """A hash of traceql's code and data files and of the versions of the libraries its figures come from."""
    digest = hashlib.sha256()
    for name in _LIBRARIES:
        try:
            digest.update(f"{name}={metadata.version(name)};".encode())
        except metadata.PackageNotFoundError:
            digest.update(f"{name}=;".encode())
    for root, path in code_files():
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def code_files() -> list[tuple[Path, Path]]:
    """The code and data files :func:`code` hashes, each with the folder of its package: traceql's and its
    leaves' (``traceql.analyzers``, ``traceql.collectors``: folders of their own in a development install)."""
    out = []
    # the leaves located, not imported (a development install maps them to folders of their own)
    for package in ("traceql", *(f"traceql.{leaf}" for leaf in ("analyzers", "collectors"))):
        spec = importlib.util.find_spec(package)
        if spec is None or spec.origin is None:
            continue
        root = Path(spec.origin).parent
        out += [(root, p) for p in sorted(root.rglob("*")) if p.suffix in (".py", ".json") and p.is_file()]
    return out


def _files(path: Path) -> list[Path]:
    """The files of an input: itself, or every file under a folder."""
    return sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]


def key(what: str, files: list[Path], options: dict[str, Any]) -> str | None:
    """The key of ``what`` computed of ``files`` (traces, folders, baselines, metrics) with ``options`` (plain
    values); None where results are not kept or an input cannot be read (the command then says why)."""
    if not enabled():
        return None
    try:
        # as given and where that is (what a result may print of it), and what it holds now
        found = [[str(f), str(f.absolute()), mirror.identity(f)] for path in files for f in _files(path)]
    except OSError:
        return None
    settings = {k: v for k, v in os.environ.items() if k.startswith("TRACEQL_") and k not in _NOT_KEYED}
    text = json.dumps({"what": what, "files": found, "options": options, "settings": settings, "code": code()},
                      sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:40]


class _Saver(pickle.Pickler):
    """Frames into Arrow files of the entry's folder, stored rows' files linked into it, the rest pickled."""

    def __init__(self, fh: io.BufferedWriter, where: Path) -> None:
        super().__init__(fh, protocol=pickle.HIGHEST_PROTOCOL)
        self.where, self.n = where, 0

    def persistent_id(self, obj: Any) -> Any:
        if isinstance(obj, pl.Series):
            obj = pl.DataFrame([obj])
            return ("series", self._frame(obj))
        if isinstance(obj, pl.DataFrame):
            return ("frame", self._frame(obj))
        if isinstance(obj, StoredRows):
            names = []
            for path in obj.files:
                names.append(f"rows-{self._next()}.parquet")
                _link(path, self.where / names[-1])
            fields = (obj.compute_kernels, obj.cases, obj.baseline_kinds, obj.reference_kinds, obj.renames)
            return ("rows", tuple(names), fields)
        if isinstance(obj, Stored):
            names = []
            for path in obj.files:
                names.append(f"activities-{self._next()}.arrow")
                _link(path, self.where / names[-1])
            return ("activities", tuple(names), tuple((b.tolist(), r.tolist(), n) for b, r, n in obj.index))
        return None

    def _next(self) -> int:
        self.n += 1
        return self.n

    def _frame(self, frame: pl.DataFrame) -> str:
        name = f"frame-{self._next()}.arrow"
        frame.write_ipc(self.where / name, compression="zstd")
        return name


class _Loader(pickle.Unpickler):
    """An entry read back: its frames and rows from its folder, and only the classes of :data:`_MODULES`."""

    def __init__(self, fh: io.BufferedReader, where: Path) -> None:
        super().__init__(fh)
        self.where = where
        self.holder: tempfile.TemporaryDirectory[str] | None = None  # made for the first rows read

    def persistent_load(self, pid: Any) -> Any:
        kind, name, *more = pid
        if kind == "frame":
            return pl.read_ipc(self.where / name)
        if kind == "series":
            return pl.read_ipc(self.where / name).to_series()
        if kind == "rows":  # linked into a folder of the result's own: a later eviction leaves them to it
            n, cases, baseline, reference, renames = more[0]
            return StoredRows(self._lent(name), n, cases, baseline, reference, renames, holder=self.holder)
        if kind == "activities":  # each file's footer read: one cut short is no entry (the command labels again)
            index = tuple((np.asarray(b, np.int64), np.asarray(r, np.int64), n) for b, r, n in more[0])
            files = self._lent(name)
            for path in files:
                pl.read_ipc_schema(path)
            return Stored(files, index, holder=self.holder)
        raise pickle.UnpicklingError(f"unknown part {kind!r}")

    def _lent(self, names: tuple[str, ...]) -> tuple[Path, ...]:
        """The entry's files ``names`` linked into a folder of the result's own (a later eviction leaves them), in
        the scratch folder: a run's activities are read by every worker that replays them."""
        from traceql.labelling.by_rank import scratch  # what labels a run: loaded by every command that serves one

        self.holder = self.holder or scratch("traceql-rows-")
        files = []
        for part in names:
            files.append(Path(self.holder.name) / part)
            _link(self.where / part, files[-1])
        return tuple(files)

    def find_class(self, module: str, name: str) -> Any:
        if module == "builtins" and name in _BUILTINS or module.startswith(_MODULES) or module in _MODULES:
            found = super().find_class(module, name)
            if isinstance(found, type):
                return found
        raise pickle.UnpicklingError(f"{module}.{name} is not made from a kept result")


def _link(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def _where(k: str) -> Path:
    """The folder of the entry kept under ``k``."""
    return mirror.folder() / f"{PREFIX}{k}"


def holds(k: str | None) -> bool:
    """Whether a result is kept under ``k`` (read neither, nor said served: what a command asks before it
    computes something for another)."""
    return k is not None and enabled() and (_where(k) / "manifest.json").is_file()


def load(k: str | None, *, labels: bool = False, replay: bool = False) -> Any:
    """The result kept under ``k``, None where there is none (or it cannot be read: then it is removed); a result
    found is marked used (the eviction's order), and said served (:func:`served`; ``labels``: the labels a
    command started from, :func:`labels_served`; ``replay``: a replay of them, :func:`replays_served`)."""
    if k is None or not enabled():
        return None
    where = _where(k)
    loader = None
    try:
        manifest = where / "manifest.json"
        made = float(json.loads(manifest.read_text()).get("made", 0))
        os.utime(manifest)
        with (where / "result.pickle").open("rb") as fh:
            loader = _Loader(fh, where)
            got = loader.load()
        (_labels if labels else _replays if replay else _served).append(made)
        return got
    except (OSError, ValueError, EOFError, pickle.UnpicklingError, AttributeError, ImportError,
            pl.exceptions.PolarsError):
        if loader is not None:  # an entry that cannot be read back goes: the command keeps a whole one again
            if loader.holder is not None:
                loader.holder.cleanup()
            shutil.rmtree(where, ignore_errors=True)
        return None


def _stale(root: Path) -> None:
    """The results of another traceql (or other libraries) removed: none of them can be served again."""
    for manifest in root.glob(f"{PREFIX}*/manifest.json"):
        try:
            if json.loads(manifest.read_text()).get("code") != code():
                shutil.rmtree(manifest.parent, ignore_errors=True)
        except (OSError, ValueError):
            continue


def save(k: str | None, result: Any, source: str) -> None:
    """``result`` kept under ``k`` (``source``: what ``cache info`` says it is); nothing where the cache is off
    or cannot be written, or another command kept it first."""
    if k is None or not enabled():
        return
    work = mirror.workspace(f"{PREFIX}{k}")
    if work is None:
        return
    try:
        with (work / "result.pickle").open("wb") as fh:
            _Saver(fh, work).dump(result)
        (work / "manifest.json").write_text(json.dumps({"source": source, "tables": [], "meta": {},
                                                               "code": code(), "made": time.time()}))
        _stale(mirror.folder())
        mirror.publish(work, f"{PREFIX}{k}")
    except (OSError, pickle.PicklingError, pl.exceptions.PolarsError):
        return
    finally:
        shutil.rmtree(work, ignore_errors=True)
