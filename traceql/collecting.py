"""Running a collection from traceql (the `collectors` package does the work): its failures become
:class:`traceql.errors.CollectFailed`, with the exit code of their stage."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from traceql.collectors.errors import CollectError
from traceql.collectors.launch import LaunchOptions, collect
from traceql.collectors.profilers import ProfilerOptions
from traceql.errors import CollectFailed


@contextmanager
def collect_errors() -> Iterator[None]:
    """Turn a :class:`CollectError` raised inside the block into :class:`CollectFailed`."""
    try:
        yield
    except CollectError as exc:
        raise CollectFailed(str(exc), detail=exc.detail, stage=exc.stage) from None


def run_collection(input_dir: str | Path, profiler: ProfilerOptions, *, out: Path | None = None,
                   launch: LaunchOptions | None = None, overrides: dict[str, Any] | None = None,
                   progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run one collection; returns its manifest."""
    with collect_errors():
        return collect(input_dir, profiler, out=out, launch=launch, overrides=overrides, progress=progress)
