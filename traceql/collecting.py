"""Running a collection from traceql (the `collectors` package does the work): its failures become
:class:`traceql.errors.CollectFailed`, with the exit code of their stage."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from traceql.collectors.errors import CollectError
from traceql.collectors.launch import LaunchOptions, collect
from traceql.collectors.profilers import ProfilerOptions
from traceql.errors import CollectFailed, OptionError


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


def overrides(items: list[str] | None) -> dict[str, Any]:
    """``--set KEY=VALUE`` items as a dict; values are JSON where they parse as JSON, else strings."""
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise OptionError(f"--set {item!r}: expected KEY=VALUE, e.g. --set cap_size=2")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def ranks_option(text: str | None) -> list[int] | None:
    """``--ranks 0,2`` as a list of rank numbers; None (all ranks) when not given."""
    if text is None:
        return None
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise OptionError(f"--ranks {text!r}: expected rank numbers such as 0 or 0,2") from None
