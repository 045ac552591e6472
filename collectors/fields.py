"""What a JSON field must hold, declared once and checked with one error line naming the file and the key.

Every JSON file a user writes or edits (profiles, sweeps, a model's local_config, cluster files) is checked
through these: numbers finite and in range, integers whole (never a boolean), text where text is wanted.

    SPEC = {"steps": integer(1), "timeout": number(0, above=True, null=True), "device": one_of("auto", "cpu")}
    check(data, SPEC, "sweep.json")    # CollectError: "sweep.json: steps must be an integer of at least 1, got 0"
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from traceql.collectors.errors import CollectError


@dataclass(frozen=True)
class Field:
    """What a key must hold: ``what`` says it in an error message, ``test`` checks a value; ``each`` checks the
    items of a list one by one, ``keys`` the keys of an object."""

    what: str
    test: Callable[[Any], bool]
    each: Field | None = None
    keys: dict[str, Field] | None = None
    partial: bool = False  # the object may leave out some of ``keys``


def finite(value: Any) -> bool:
    """A JSON number (not a boolean) that is a finite float: no NaN, no infinity, no integer beyond a float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def number(least: float = 0, *, above: bool = False, null: bool = False) -> Field:
    """A finite number of at least ``least`` (above it with ``above``); ``null`` allows null."""
    what = f"a finite number {'above' if above else 'of at least'} {least:g}" + (" or null" if null else "")
    return Field(what, lambda v: (null and v is None) or (finite(v) and (v > least if above else v >= least)))


def integer(least: int = 0, *, most: int | None = None, null: bool = False) -> Field:
    """An integer (not a boolean) of at least ``least`` (and at most ``most``); ``null`` allows null."""
    what = (f"an integer of at least {least}" + (f" and at most {most:,}" if most is not None else "")
            + (" or null" if null else ""))
    return Field(what, lambda v: (null and v is None) or (isinstance(v, int) and not isinstance(v, bool)
                                                         and v >= least and (most is None or v <= most)))


def of_type(what: str, *types: type, null: bool = False) -> Field:
    """A value of ``types`` (a boolean only where ``bool`` is one of them); ``null`` allows null."""
    return Field(what + (" or null" if null else ""),
                 lambda v: (null and v is None) or (isinstance(v, types) and not (isinstance(v, bool)
                                                                                  and bool not in types)))


def one_of(*choices: str) -> Field:
    """One of the strings ``choices``."""
    return Field(f"one of {', '.join(choices)}", lambda v: isinstance(v, str) and v in choices)


def list_of(item: Field, *, least: int = 0) -> Field:
    """A list of at least ``least`` items, each ``item``."""
    what = f"a list{f' of at least {least} item' + ('s' if least > 1 else '') if least else ''}, each {item.what}"
    return Field(what, lambda v: isinstance(v, list) and len(v) >= least, each=item)


def obj(keys: dict[str, Field], *, null: bool = False, partial: bool = False) -> Field:
    """An object with ``keys`` (some of them, with ``partial``); ``null`` allows null."""
    return Field("an object" + (" or null" if null else ""), lambda v: (null and v is None) or isinstance(v, dict),
                 keys=keys, partial=partial)


def shown(value: Any, width: int = 40) -> str:
    """A value as JSON writes it (``NaN``, ``Infinity``, ``"text"``, ``true``), cut to ``width`` characters."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= width else text[:width - 1] + "…"


def check_value(value: Any, field: Field, where: str) -> None:
    """CollectError ``<where> must be <what>, got <value>`` unless ``value`` is what ``field`` wants (its items
    and keys too)."""
    if not field.test(value):
        raise CollectError(f"{where} must be {field.what}, got {shown(value)}")
    if field.each is not None:
        for i, item in enumerate(value):
            check_value(item, field.each, f"{where}[{i}]")
    if field.keys is not None and value is not None:
        check(value, field.keys, where, optional=field.partial)


def check(data: dict[str, Any], spec: dict[str, Field], where: str, *, optional: bool = False) -> None:
    """CollectError naming ``where`` and the key for the first key of ``spec`` that ``data`` lacks (unless
    ``optional``: then a missing key is fine) or holds wrongly."""
    for key, field in spec.items():
        if key not in data:
            if optional:
                continue
            raise CollectError(f"{where}: missing key {key!r}")
        check_value(data[key], field, f"{where}: {key}")
