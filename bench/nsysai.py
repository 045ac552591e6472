"""nsys-ai beside traceql (``bench/scale.py --nsys-ai``): its diagnosis and views of one export, timed as the
scale bench times traceql's commands."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from timing import measure, row, scans

NSYS_AI_SKILLS = ("overlap_breakdown", "nccl_breakdown")  # its views of what `detect` answers


def settle(built: Path, quiet_s: float = 3, limit_s: float = 300) -> None:
    """Wait until nsys-ai's cache folder (``built``) has not changed for ``quiet_s``: it goes on writing it after
    the command that started it has ended (a command started sooner finds half a cache and fails)."""
    end, last, since = time.monotonic() + limit_s, None, time.monotonic()
    while time.monotonic() < end:
        try:
            now = sorted((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in built.iterdir())
        except OSError:
            now = []
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return
        time.sleep(0.5)


def nsys_ai_rows(exe: str | None, export: Path) -> None:
    """nsys-ai (``exe``: its command) on one export (it reads one, one GPU): its diagnosis with no Parquet cache
    of its own (``cold``: it builds it, beside the export), then with it, and its overlap and NCCL views; each
    time over the bare scans of that export alone."""
    if not exe:
        return
    print(f"nsys-ai on {export.name} alone", flush=True)
    bare = scans([export])
    built = export.with_name(export.stem + ".nsys-cache")
    shutil.rmtree(built, ignore_errors=True)
    built.with_name(built.name + ".build.lock").unlink(missing_ok=True)
    runs = [("nsys-ai diagnose, cold", ["diagnose", str(export), "--format", "json"]),
            ("nsys-ai diagnose, warm", ["diagnose", str(export), "--format", "json"]),
            *((f"nsys-ai {s}, warm", ["skill", "run", s, str(export), "--format", "json"]) for s in NSYS_AI_SKILLS)]
    try:
        for name, cmd in runs:
            try:
                row(name, *measure([exe, *cmd]), bare)
            except SystemExit as failed:  # its failure said, the bench goes on
                print(f"{name:32s} failed: {' '.join(str(failed.code).split())[-300:]}", flush=True)
            settle(built)
    finally:
        shutil.rmtree(built, ignore_errors=True)
        built.with_name(built.name + ".build.lock").unlink(missing_ok=True)
