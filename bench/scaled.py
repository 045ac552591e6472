"""Real traces made longer: their training steps repeated, shifted in time, as a longer capture would hold them.

An nsys export is copied and its GPU activities (kernels, memory copies and sets), the runtime calls that
launched them and its NVTX ranges are inserted again ``copies - 1`` times, each copy shifted by the capture's
span and given fresh correlation ids and step numbers (``step_3`` of copy 2 becomes ``step_<3 + 2 × S>``), so
that every copy is a run of new steps. A Kineto trace is repeated the same way (``ts``, correlation and
``ProfilerStep#`` numbers shifted). Used by ``bench/scale.py``.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import sqlite3
from pathlib import Path

ACTIVITIES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
NVTX = "NVTX_EVENTS"
STEP = re.compile(r"^(step_|ProfilerStep#)([0-9]+)(.*)$")


def _columns(con: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in con.execute(f"PRAGMA table_info({table})")]


def _tables(con: sqlite3.Connection) -> set[str]:
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _shifted(columns: list[str], shifts: dict[str, str]) -> str:
    return ", ".join(shifts.get(c, f'"{c}"') for c in columns)


def nsys_period(src: Path) -> int:
    """How far apart the copies of ``src``'s timeline go: its span and 1 ms."""
    con = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    try:
        tables = _tables(con) & {*ACTIVITIES, RUNTIME, NVTX}
        bounds = [con.execute(f"SELECT min(start), max(coalesce(\"end\", start)) FROM {t}").fetchone()
                  for t in tables]
    finally:
        con.close()
    return max(b[1] for b in bounds if b[1] is not None) - min(b[0] for b in bounds if b[0] is not None) + 1_000_000


def scale_nsys(src: Path, dst: Path, copies: int, period: int | None = None) -> int:
    """Write ``dst``: ``src`` with its timeline repeated ``copies`` times, ``period`` ns apart (default: its own
    span and 1 ms; the rank exports of one run need one period, :func:`run_period`, or their ranks drift
    apart); returns the kernel count."""
    period = nsys_period(src) if period is None else period
    shutil.copyfile(src, dst)
    con = sqlite3.connect(dst)
    con.execute("PRAGMA journal_mode = OFF")
    con.execute("PRAGMA synchronous = OFF")
    tables = _tables(con) & {*ACTIVITIES, RUNTIME, NVTX}
    corr = 1 + max(con.execute(f"SELECT coalesce(max(correlationId), 0) FROM {t}").fetchone()[0]
                   for t in tables if t != NVTX)
    steps = 1 + max((int(m.group(2)) for (text,) in con.execute(f"SELECT DISTINCT text FROM {NVTX}")
                     if text and (m := STEP.match(text))), default=0)
    launched = " UNION ".join(f"SELECT correlationId FROM {t}" for t in tables & set(ACTIVITIES))
    if RUNTIME in tables:  # only the calls that launched something: the model needs no others
        con.execute(f"DELETE FROM {RUNTIME} WHERE correlationId NOT IN ({launched})")
    con.execute("CREATE TEMP TABLE copies AS WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c "
                f"WHERE i < {copies - 1}) SELECT i FROM c")
    time_shift = {"start": f"start + i * {period}", "end": f'"end" + i * {period}'}
    for table in sorted(tables):
        shifts = dict(time_shift)
        if table != NVTX:
            shifts["correlationId"] = f"correlationId + i * {corr}"
        else:
            shifts["text"] = (f"CASE WHEN text GLOB 'step_[0-9]*' THEN 'step_' || "
                              f"(CAST(substr(text, 6) AS INTEGER) + i * {steps}) || "
                              "CASE WHEN text LIKE '%\\_nosync' ESCAPE '\\' THEN '_nosync' ELSE '' END ELSE text END")
        cols = _columns(con, table)
        if copies > 1:
            con.execute(f"INSERT INTO {table} ({', '.join(f'{c!r}'.replace(chr(39), chr(34)) for c in cols)}) "
                        f"SELECT {_shifted(cols, shifts)} FROM {table}, copies")
    con.commit()
    kernels = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    con.close()
    return kernels


def run_period(files: list[Path]) -> int:
    """One period for the rank exports of one run (the longest of theirs), so that every rank's copies stay
    together on the run's clock."""
    return max(nsys_period(f) for f in files)


def _renumbered(name: str, shift: int) -> str:
    m = STEP.match(name)
    return f"{m.group(1)}{int(m.group(2)) + shift}{m.group(3)}" if m else name


def _kineto(src: Path) -> dict:
    opener = gzip.open if src.suffix == ".gz" else open
    with opener(src, "rt") as f:
        return json.load(f)


def kineto_period(src: Path) -> float:
    """How far apart (µs) the copies of the Kineto trace ``src`` go: its span and 1 ms."""
    timed = [e for e in _kineto(src)["traceEvents"] if isinstance(e.get("ts"), (int, float))]
    return max(e["ts"] + (e.get("dur") or 0) for e in timed) - min(e["ts"] for e in timed) + 1000.0


def scale_kineto(src: Path, dst: Path, copies: int, period: float | None = None) -> int:
    """Write ``dst`` (gzipped when its name ends in .gz): the Kineto trace ``src`` repeated ``copies`` times,
    ``period`` µs apart (default its own: :func:`kineto_period`; one for a run's ranks, the longest of theirs);
    returns the number of GPU kernels."""
    doc = _kineto(src)
    events = doc["traceEvents"]
    period = kineto_period(src) if period is None else period
    corr = 1 + max((e.get("args", {}).get("correlation") or 0 for e in events if isinstance(e.get("args"), dict)),
                   default=0)
    steps = 1 + max((int(m.group(2)) for e in events if (m := STEP.match(str(e.get("name", ""))))), default=0)
    out = []
    for i in range(copies):
        for e in events:
            if i and not isinstance(e.get("ts"), (int, float)):
                continue  # metadata events once
            e2 = dict(e)
            if i:
                e2["ts"] = e["ts"] + i * period
                if isinstance(e.get("args"), dict):
                    args = dict(e["args"])
                    for key in ("correlation", "External id"):
                        if isinstance(args.get(key), int):
                            args[key] += i * corr
                    e2["args"] = args
                if isinstance(e.get("name"), str):
                    e2["name"] = _renumbered(e["name"], i * steps)
            out.append(e2)
    doc["traceEvents"] = out
    raw = json.dumps(doc, separators=(",", ":")).encode()
    dst.write_bytes(gzip.compress(raw, compresslevel=1) if dst.suffix == ".gz" else raw)
    return sum(1 for e in out if e.get("cat") == "kernel")


def link_ranks(exports: list[Path], folder: Path, count: int) -> list[Path]:
    """A run of ``count`` rank exports in ``folder``: ``exports`` linked (or copied, across file systems) in
    turn under the names ``<stem>_rank<i>.sqlite``; made once."""
    folder.mkdir(parents=True, exist_ok=True)
    stem = exports[0].name.split("_rank")[0]
    run = []
    for r in range(count):
        dst = folder / f"{stem}_rank{r}.sqlite"
        if not dst.exists():
            try:
                os.link(exports[r % len(exports)], dst)
            except OSError:
                shutil.copyfile(exports[r % len(exports)], dst)
        run.append(dst)
    return run
