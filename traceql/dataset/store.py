"""A slowdown dataset on disk: parquet files partitioned by model and configuration, and dataset.json.

    DIR/dataset.json                                   every entry: inputs, config, versions, counts
    DIR/data/model=<m>/config=<c>/<entry>.parquet      one file per recorded entry, the per-kernel rows
    DIR/.dataset.lock                                  taken around every read-modify-write of dataset.json
    DIR/.staging/<writer>/, <writer>.lock              an entry being written; its writer holds <writer>.lock

An entry is written in two steps. Staging, without the dataset lock (labelling and writing take the time): its
rows go to ``.staging/<writer>/`` (a temp name, renamed when complete). Recording, under the lock: the staged
parquet is renamed into ``data/``, then dataset.json is rewritten (temp + rename). So two writers never lose
each other's entries, and a file in ``data/`` that dataset.json does not record exists only between those two
renames, or after a writer was killed between them. Readers go through dataset.json (:meth:`Dataset.scan`)
and never see it; a glob of ``data/**/*.parquet`` sees it until the next write cleans up.

Cleanup, under the lock, before every write: dataset.json's temp files go; a staging folder goes once no
process holds its ``<writer>.lock`` (a writer takes it, under the dataset lock, before it makes the folder and
keeps it until it has removed it; a killed process's flock dies with it, so nothing is judged by age); every
file under ``data/`` that dataset.json does not record goes. An entry id is a function of its inputs, so adding
them again makes the same entry: never a duplicate.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from filelock import FileLock, Timeout

from traceql.collectors.files import TEMP_GLOB
from traceql.dataset import faults
from traceql.dataset.meta import FORMAT, parse
from traceql.errors import InputError, TraceqlError
from traceql.export.files import atomic_write

if TYPE_CHECKING:  # polars loads for labelling, not for collecting
    import polars as pl

LOCK_TIMEOUT_S = 600.0  # the lock is held for a rename and a rewrite of dataset.json: minutes mean a hung writer
SHOWN = 5  # missing files named in one error line


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+-]+", "_", str(text)) or "_"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class Dataset:
    """A dataset folder; created on first write."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.meta_path = self.root / "dataset.json"
        self.lock_path = self.root / ".dataset.lock"
        self.staging = self.root / ".staging"
        self._cleaned = False  # a writer cleans up once, before its first change
        self.made = False  # whether this writer made the folder

    # reading

    def _not_a_file(self) -> None:
        if self.root.exists() and not self.root.is_dir():
            raise InputError("is a file, not a dataset folder", path=str(self.root))
        for folder in (self.root / "data", self.staging):
            if folder.exists() and not folder.is_dir():
                raise InputError(f"{folder.name} is a file where the dataset keeps a folder: not a traceql dataset "
                                 "folder, or damaged", path=str(self.root))

    def read(self) -> dict[str, Any]:
        """dataset.json of an existing dataset; InputError (one line) for anything else."""
        self._not_a_file()
        if self.meta_path.is_dir():
            raise InputError("is a folder, not the dataset's JSON file", path=str(self.meta_path))
        if not self.meta_path.is_file():
            raise InputError("no such dataset (no dataset.json here)", path=str(self.root))
        return parse(self.meta_path)

    def load(self) -> dict[str, Any]:
        """dataset.json as a writer sees it: a new, empty one where there is none yet."""
        self._not_a_file()
        if not self.meta_path.exists():
            return {"format": FORMAT, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "entries": {}}
        return parse(self.meta_path)

    def _file(self, entry: dict[str, Any]) -> Path:
        return self.root / entry["file"]

    def has(self, entry_id: str) -> bool:
        """Whether the entry is recorded and its file is there (an entry whose file went missing is redone)."""
        entry = self.load()["entries"].get(entry_id)
        return entry is not None and self._file(entry).is_file()

    def recorded(self) -> set[str]:
        """Every recorded entry whose file is there (what :meth:`has` says yes to)."""
        return {k for k, e in self.load()["entries"].items() if self._file(e).is_file()}

    def files(self) -> list[Path]:
        """The parquet file of every recorded entry; InputError naming those that are missing."""
        files = [self._file(e) for e in self.read()["entries"].values()]
        missing = [f for f in files if not f.is_file()]
        if missing:
            more = f" and {len(missing) - SHOWN} more" if len(missing) > SHOWN else ""
            one = len(missing) == 1
            raise InputError(f"{len(missing)} recorded entr{'y' if one else 'ies'} lost {'its' if one else 'their'} "
                             f"parquet: {', '.join(map(str, missing[:SHOWN]))}{more} "
                             f"(add {'its source' if one else 'their sources'} again to redo "
                             f"{'it' if one else 'them'})", path=str(self.meta_path))
        return files

    def partition(self, model: str, config: str) -> Path:
        return self.root / "data" / f"model={_safe(model)}" / f"config={_safe(config)}"

    def scan(self) -> pl.LazyFrame:
        """Exactly the recorded entries' rows, lazily (each file's footer is checked now: a corrupt one is
        named). Collect through :meth:`collect` to have a file damaged further in named too."""
        import polars as pl

        files = self.files()
        if not files:
            raise InputError("the dataset has no entries yet", path=str(self.root))
        for f in files:
            try:
                pl.read_parquet_schema(f)
            except (pl.exceptions.PolarsError, OSError) as exc:
                raise _corrupt(f, exc) from None
        return pl.concat([pl.scan_parquet(f) for f in files], how="diagonal_relaxed")

    def collect(self, frame: pl.LazyFrame) -> pl.DataFrame:
        """``frame.collect()`` for a query over :meth:`scan`; a polars error from a corrupt entry names its file."""
        import polars as pl

        try:
            return frame.collect()
        except (pl.exceptions.PolarsError, OSError) as exc:
            for f in self.files():  # which one? read each whole
                try:
                    pl.read_parquet(f)
                except (pl.exceptions.PolarsError, OSError) as bad:
                    raise _corrupt(f, bad) from None
            raise exc from None

    # writing

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """The dataset lock, around every read-modify-write of dataset.json and every change under data/."""
        lock = FileLock(self.lock_path)
        try:
            lock.acquire(timeout=LOCK_TIMEOUT_S)
        except Timeout:
            raise TraceqlError(f"another writer has held the dataset lock for {LOCK_TIMEOUT_S:.0f} s",
                               path=str(self.lock_path)) from None
        except OSError as exc:  # the first file a writer makes: the folder may not be written
            raise InputError(f"cannot write in the dataset folder ({exc.strerror or exc}): check its permissions, "
                             "or choose another folder", path=str(self.root)) from None
        try:
            yield
        finally:
            lock.release()

    def _make(self) -> None:
        self._not_a_file()
        try:
            self.made = self.made or not self.root.exists()
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"cannot create the dataset folder: {exc.strerror or exc}", path=str(self.root)) from None

    def prepare(self) -> None:
        """Before a write: check dataset.json (a damaged one is refused before anything is made), make the
        folder, and clear (under the lock) what interrupted writers left."""
        self.load()
        self._make()
        with self._locked():
            self._clean(self.load())

    def discard_if_unused(self) -> None:
        """Remove the folder this writer made when it holds nothing of value: no dataset.json, nothing but the
        lock file and empty working folders (a command whose every entry failed leaves nothing behind)."""
        if not self.made or self.meta_path.exists() or not self.root.is_dir():
            return
        ours = {self.lock_path.name, self.staging.name, "data"}
        if any(p.name not in ours or (p.is_dir() and any(p.rglob("*"))) for p in self.root.iterdir()):
            return
        shutil.rmtree(self.root, ignore_errors=True)

    def _clean(self, meta: dict[str, Any]) -> None:
        """Under the lock: remove temp files, abandoned staging folders and files under data/ not recorded."""
        self._cleaned = True
        for tmp in self.root.glob(TEMP_GLOB):  # dataset.json's, written under the lock only
            tmp.unlink(missing_ok=True)
        if self.staging.is_dir():
            for lock_file in self.staging.glob("*.lock"):
                owner = FileLock(lock_file)
                try:
                    owner.acquire(timeout=0)
                except Timeout:
                    continue  # its writer is alive (staging, or waiting for the lock)
                try:
                    shutil.rmtree(self.staging / lock_file.stem, ignore_errors=True)
                    lock_file.unlink(missing_ok=True)
                finally:
                    owner.release()
            for p in self.staging.iterdir():  # a folder is made after its lock file and removed before it
                if not p.name.endswith(".lock") and not (self.staging / f"{p.name}.lock").exists():
                    shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink(missing_ok=True)
        data = self.root / "data"
        if data.is_dir():
            recorded = {os.path.normpath(self._file(e)) for e in meta["entries"].values()}
            for p in sorted(data.rglob("*"), reverse=True):  # children before their folder
                if p.is_dir() and not p.is_symlink():
                    with suppress(OSError):
                        p.rmdir()  # an emptied partition
                elif os.path.normpath(p) not in recorded:
                    p.unlink(missing_ok=True)

    @contextmanager
    def _writer(self) -> Iterator[Path]:
        """A staging folder of this writer's own, registered (its lock taken) under the dataset lock, so a cleanup
        never takes a live writer's folder for an abandoned one."""
        self._make()
        with self._locked():
            if not self._cleaned:
                self._clean(self.load())
            self.staging.mkdir(exist_ok=True)
            token = f"{os.getpid()}-{secrets.token_hex(6)}"
            own = FileLock(self.staging / f"{token}.lock")
            own.acquire(timeout=0)  # a new name: nobody else holds it
            folder = self.staging / token
            folder.mkdir()
        try:
            yield folder
        finally:
            shutil.rmtree(folder, ignore_errors=True)
            own.release()
            Path(own.lock_file).unlink(missing_ok=True)

    def add(self, entry_id: str, model: str, config: str, rows: pl.DataFrame, info: dict[str, Any]) -> Path | None:
        """Stage one entry's rows, then (under the lock) move them into data/ and record them. None when
        another writer recorded this entry meanwhile (the staged rows are dropped)."""
        path = self.partition(model, config) / f"{_safe(entry_id)}.parquet"
        try:
            return self._add(path, entry_id, model, config, rows, info)
        except OSError as exc:  # a file where a folder must be (data/), a full disk
            raise InputError(f"cannot write the entry {entry_id} ({exc.strerror or exc}: "
                             f"{exc.filename or path})", path=str(self.root)) from None

    def _add(self, path: Path, entry_id: str, model: str, config: str, rows: pl.DataFrame,
             info: dict[str, Any]) -> Path | None:
        with self._writer() as folder:
            staged = folder / path.name
            atomic_write(staged, lambda fh: rows.write_parquet(fh))
            faults.point("staged")
            with self._locked():
                faults.point("locked")
                meta = self.load()
                if entry_id in meta["entries"] and self._file(meta["entries"][entry_id]).is_file():
                    return None
                path.parent.mkdir(parents=True, exist_ok=True)
                os.replace(staged, path)
                faults.point("moved")
                meta["entries"][entry_id] = {**info, "model": model, "config": config,
                                             "file": str(path.relative_to(self.root)), "rows": rows.height,
                                             "added": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
                data = json.dumps(meta, indent=1, default=str).encode()
                atomic_write(self.meta_path, lambda fh: fh.write(data))
                faults.point("recorded")
        return path


def _corrupt(path: Path, exc: BaseException) -> InputError:
    return InputError(f"cannot read this entry's parquet ({_first_line(exc)}); delete it and add its source again",
                      path=str(path))
