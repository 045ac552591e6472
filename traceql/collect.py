"""`traceql collect`: run a training input folder under a profiler (the collectors package does the work)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from collectors.errors import CollectError
from collectors.launch import LaunchOptions, collect
from collectors.profilers import ProfilerOptions
from traceql.errors import TraceqlError


class CollectFailed(TraceqlError):
    """A collection that could not start or did not finish; ``detail`` holds a rank's log tail."""

    def __init__(self, message: str, detail: str, exit_code: int) -> None:
        super().__init__(message)
        self.detail = detail
        self.exit_code = exit_code


def run_collect(input_dir: str | Path, profiler: ProfilerOptions, *, out: Path | None = None,
                launch: LaunchOptions | None = None, overrides: dict[str, Any] | None = None,
                progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run one collection; returns its manifest. Failures become :class:`CollectFailed`."""
    try:
        return collect(input_dir, profiler, out=out, launch=launch, overrides=overrides, progress=progress)
    except CollectError as exc:
        raise CollectFailed(str(exc), exc.detail, exc.exit_code) from None
