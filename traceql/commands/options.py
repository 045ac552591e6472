"""User options that need more than a type: checked here, once, for every command that takes them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from traceql.errors import OptionError

# `diff`: a median step time within ±2 % of BEFORE's is "no change". On the shared H200 corpus the median step
# time of one run varies by up to 0.57 % (bootstrap SD over its steps and ranks), so that of a difference of
# two runs by about 0.6-0.8 %: 2 % is some three of those. (Here, not in traceql.analyzers.diff: the command line
# shows it as a default without loading polars.)
NO_CHANGE_PCT = 2.0


def threshold(value: float) -> float:
    """A slowdown ratio: above 1.0."""
    if not value > 1.0:
        raise OptionError(f"--threshold must be above 1.0 (a slowdown ratio), got {value}")
    return value


def overrides(items: list[str] | None) -> dict[str, Any]:
    """``--set KEY=VALUE`` items as a dict; values are JSON where they parse as JSON, else strings."""
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise OptionError(f"--set {item!r}: expected KEY=VALUE, e.g. --set cap_size=2")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def ranks(text: str | None) -> list[int] | None:
    """``--ranks 0,2`` as a list of rank numbers; None (all ranks) when not given."""
    if text is None:
        return None
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise OptionError(f"--ranks {text!r}: expected rank numbers such as 0 or 0,2") from None


def not_an_input(output: str | Path, paths: Sequence[str | Path] | str | Path | None, option: str) -> Path:
    """``output``, unless it is one of the input files ``paths`` resolve to: traceql never writes an input."""
    from traceql.sources import inputs

    given = [paths] if isinstance(paths, (str, Path)) else list(paths or [])
    target = Path(output).resolve()
    for f in inputs.resolve(given or None):
        if f.path.resolve() == target:
            raise OptionError(f"{option} {output}: that is an input trace; traceql never writes its inputs")
    return Path(output)
