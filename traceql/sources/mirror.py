"""A columnar copy of every Nsight Systems export traceql reads, kept in the user's cache folder.

The first command that reads an export copies the tables traceql reads (:data:`TABLES`) into zstd Parquet
files, one scan of each table, and from then on every command, every shard of a run read a part at a time
and every worker reads those instead of the SQLite file (which stays untouched: it is never written, nothing
is made beside it). A copy is found by the export's identity (:func:`identity`: its size, modification time
and a hash of its first and last bytes), so that a file rewritten, truncated or replaced is never served from
an old copy.

    entry = lookup(path)                       # None: no copy (or the cache is off)
    entry = entry or build(con, alias, path, tables, meta)

Copies are written into a temporary folder and renamed into place (a reader never sees half a copy; of two
commands copying one export at once, the first rename wins). The cache is bounded (:func:`limit`, 4 GiB
unless ``TRACEQL_CACHE_LIMIT`` says otherwise): after a copy is written, the copies used least recently go
until the rest fit, never one used in the last :data:`BUSY_S` seconds (each read marks its copy used, so
that a copy is not taken from under a command reading it). ``--no-cache`` or ``TRACEQL_NO_CACHE=1`` turns it
off; ``TRACEQL_CACHE_DIR`` moves it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from traceql.analyzers.units import parse_size
from traceql.errors import OptionError

if TYPE_CHECKING:  # the switch (``turn_off``) is set by every command: it loads no database engine
    import duckdb

DIR_ENV = "TRACEQL_CACHE_DIR"
OFF_ENV = "TRACEQL_NO_CACHE"
LIMIT_ENV = "TRACEQL_CACHE_LIMIT"
LIMIT = 4 * 2**30
BUSY_S = 1800  # a copy used this recently is never evicted
LAYOUT = 1  # the copies' layout: a change makes every older copy a miss
EDGE = 1 << 16  # bytes of the file's start and of its end hashed into its identity
# the tables of an export traceql reads (``nsys*.py``); the others are never copied
TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_MEMCPY",
          "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "CUPTI_ACTIVITY_KIND_CUDA_EVENT",
          "NVTX_EVENTS", "StringIds", "TARGET_INFO_GPU", "TARGET_INFO_SESSION_START_TIME", "ENUM_CUPTI_SYNC_TYPE",
          "META_DATA_EXPORT", "EXPORT_META_DATA")
# columns a copy leaves out: NCCL's payloads (read from the export itself: ``nsys_comms``)
LEFT_OUT = {"NVTX_EVENTS": ("binaryData", "jsonText")}
# the columns a copy keeps of a table traceql reads a few of: the CUDA calls' (``nsys_kernels.read_launches``,
# ``nsys_plan``), a third of its columns and half the time its copy takes; the kernels' (``nsys_kernels``,
# ``nsys_parts``): 17 of 28, the copy 40 % quicker; the memory operations' (``nsys._load_memops``)
_MEMORY = ("start", "end", "deviceId", "streamId", "correlationId", "globalPid", "bytes")
KEPT = {"CUPTI_ACTIVITY_KIND_RUNTIME": ("start", "globalTid", "correlationId"),
        "CUPTI_ACTIVITY_KIND_KERNEL": ("start", "end", "deviceId", "streamId", "correlationId", "globalPid",
                                       "demangledName", "shortName", "registersPerThread", "gridX", "gridY", "gridZ",
                                       "blockX", "blockY", "blockZ", "staticSharedMemory", "dynamicSharedMemory"),
        "CUPTI_ACTIVITY_KIND_MEMCPY": (*_MEMORY, "copyKind"),
        "CUPTI_ACTIVITY_KIND_MEMSET": _MEMORY}


@dataclass(frozen=True)
class Entry:
    """One export's copy: its folder, the tables it holds, and what the export's attach learnt (``meta``:
    its version, schema, session start, notes)."""

    folder: Path
    tables: tuple[str, ...]
    meta: dict[str, Any]


def folder() -> Path:
    """Where the copies are: ``TRACEQL_CACHE_DIR``, else the user's cache folder (platformdirs)."""
    given = os.environ.get(DIR_ENV, "").strip()
    if given:
        return Path(given).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("traceql", appauthor=False)) / "exports"


_turned_off: list[bool] = []  # whether --no-cache set the environment's variable (and it is this one to undo)


def turn_off(off: bool) -> None:
    """``--no-cache`` for this command and the workers it starts (through the environment); a command without
    it undoes an earlier command's in the same process, never the environment's own setting."""
    if off and not enabled():
        return
    if off:
        os.environ[OFF_ENV] = "1"
        _turned_off.append(True)
    elif _turned_off:
        os.environ.pop(OFF_ENV, None)
        _turned_off.clear()


def enabled() -> bool:
    """Whether copies are read and written (off with ``--no-cache`` or ``TRACEQL_NO_CACHE``)."""
    return os.environ.get(OFF_ENV, "").strip().lower() in ("", "0", "false", "no")


def limit() -> int:
    """The cache's bound in bytes: ``TRACEQL_CACHE_LIMIT`` (``500MB``, ``8GB``, bytes), else 4 GiB."""
    text = os.environ.get(LIMIT_ENV, "").strip()
    try:
        return parse_size(text) if text else LIMIT
    except ValueError as err:
        raise OptionError(f"{LIMIT_ENV}={text!r}: {err}") from None


def identity(path: Path) -> str:
    """The export as it is now: its size, modification time and a hash of its first and last 64 KiB."""
    st = path.stat()
    digest = hashlib.sha256(f"{LAYOUT}:{st.st_size}:{st.st_mtime_ns}".encode())
    with path.open("rb") as fh:
        digest.update(fh.read(EDGE))
        fh.seek(max(0, st.st_size - EDGE))
        digest.update(fh.read(EDGE))
    return digest.hexdigest()[:32]


def lookup(path: Path) -> Entry | None:
    """The copy of the export at ``path`` as it is now, None where there is none (or the cache is off); a copy
    found is marked used (its manifest's time: the eviction's order)."""
    if not enabled():
        return None
    try:
        where = folder() / identity(path)
        manifest = where / "manifest.json"
        data = json.loads(manifest.read_text())
        os.utime(manifest)
    except (OSError, ValueError):
        return None
    return Entry(where, tuple(data["tables"]), data["meta"])


def build(con: duckdb.DuckDBPyConnection, alias: str, path: Path, tables: set[str],
          meta: dict[str, Any]) -> Entry | None:
    """Copy the export attached as ``alias`` into the cache (one scan of each table it has of :data:`TABLES`);
    None where the cache is off, cannot be written, or the export changed while it was copied."""
    if not enabled():
        return None
    import duckdb

    from traceql.model.engine import interrupted, sql_literal

    try:
        before = identity(path)
    except OSError:
        return None
    work = workspace(before)
    if work is None:
        return None
    try:
        kept = [t for t in TABLES if t in tables]
        for table in kept:
            has = _columns(con, alias, table)
            skip = ", ".join(f'"{c}"' for c in LEFT_OUT.get(table, ()) if c in has)
            cols = f"* EXCLUDE ({skip})" if skip else "*"
            if table in KEPT and set(KEPT[table]) <= has:
                cols = ", ".join(f'"{c}"' for c in KEPT[table])
            target = sql_literal(str(work / f"{table}.parquet"))
            con.execute(f"COPY (SELECT {cols} FROM {alias}.{table}) TO {target} "
                        "(FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 122880)")
        (work / "manifest.json").write_text(json.dumps({"source": str(path), "tables": kept, "meta": meta}))
        if identity(path) != before:  # written to while it was copied
            return None
        final = publish(work, before)
        return Entry(final, tuple(kept), meta) if final is not None else None
    except OSError:
        return None
    except (duckdb.Error, RuntimeError, UnicodeDecodeError) as exc:  # read where it is used, to say what is wrong
        if interrupted(exc):
            raise KeyboardInterrupt from exc
        return None
    finally:
        shutil.rmtree(work, ignore_errors=True)


def workspace(name: str) -> Path | None:
    """A fresh temporary folder in the cache folder for an entry ``name`` being written (made with the cache
    folder); None where it cannot be made."""
    try:
        root = folder()
        root.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root))
    except OSError:
        return None


def publish(work: Path, name: str) -> Path | None:
    """The entry written in ``work`` (:func:`workspace`, its ``manifest.json`` last) renamed into place as
    ``name``, then the cache brought within its bound (:func:`evict`): its folder; that of another command's
    entry of the same name where one came first (the same content), None where that is incomplete."""
    final = folder() / name
    try:
        os.rename(work, final)
    except OSError:
        if not (final / "manifest.json").is_file():
            return None
    evict(keep=final)
    return final


def _columns(con: duckdb.DuckDBPyConnection, alias: str, table: str) -> set[str]:
    return {r[0] for r in con.execute(f"DESCRIBE {alias}.{table}").fetchall()}


def use(con: duckdb.DuckDBPyConnection, entry: Entry, alias: str) -> bool:
    """The copy as ``alias``: a schema whose views are its tables, read as the attached export is; False (and
    nothing made) where its files are gone."""
    import duckdb

    from traceql.model.engine import sql_literal

    con.execute(f"CREATE SCHEMA {alias}")
    try:
        for table in entry.tables:
            con.execute(f"CREATE VIEW {alias}.{table} AS SELECT * FROM "
                        f"read_parquet({sql_literal(str(entry.folder / f'{table}.parquet'))})")
    except duckdb.IOException:
        con.execute(f"DROP SCHEMA {alias} CASCADE")
        return False
    return True


def entries() -> list[tuple[Path, int, float, str]]:
    """Every complete copy: its folder, bytes, last use (epoch seconds) and the export it was made from, oldest
    use first. A file linked into several (a result's rows, kept with its labels) counts once: in the one used
    last, which holds it longest."""
    root = folder()
    found = []
    for manifest in root.glob("*/manifest.json") if root.is_dir() else []:
        try:
            source = json.loads(manifest.read_text()).get("source", "?")
            files = [p.stat() for p in manifest.parent.iterdir()]
            found.append((manifest.parent, files, manifest.stat().st_mtime, source))
        except (OSError, ValueError):
            continue
    seen: set[tuple[int, int]] = set()
    out = []
    for where, files, used, source in sorted(found, key=lambda e: e[2], reverse=True):
        mine = {(f.st_dev, f.st_ino): f.st_size for f in files if (f.st_dev, f.st_ino) not in seen}
        seen |= mine.keys()
        out.append((where, sum(mine.values()), used, source))
    return out[::-1]


def evict(keep: Path) -> None:
    """The least recently used copies removed until the cache fits its bound, but for those in use."""
    found = entries()
    total = sum(e[1] for e in found)
    now = time.time()
    for where, size, used, _source in found:
        if total <= limit():
            break
        if where != keep and now - used > BUSY_S:
            shutil.rmtree(where, ignore_errors=True)
            total -= size
    _sweep()


def _sweep() -> None:
    """Temporary folders of copies whose command died (more than an hour old) removed."""
    now = time.time()
    for stale in folder().glob(".*-*"):
        with contextlib.suppress(OSError):
            if stale.is_dir() and now - stale.stat().st_mtime > 3600:
                shutil.rmtree(stale, ignore_errors=True)


def clear() -> tuple[int, int]:
    """Every copy removed: how many, and their bytes."""
    found = entries()
    for where, *_ in found:
        shutil.rmtree(where, ignore_errors=True)
    _sweep()
    return len(found), sum(e[1] for e in found)
