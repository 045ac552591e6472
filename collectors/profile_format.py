"""Profile files: what `traceql profile` measures about a model on one GPU type, and `traceql solve` reads.

A profile folder holds JSON files ``<kind>-<gpu slug>.json``, each an object with ``format``
(``traceql-profile/1``), ``kind``, ``model`` (the input folder's name), ``gpu`` (the device's name, e.g.
``NVIDIA H200``; ``cpu`` on CPUs) and, by kind:

- ``memory``: ``memory_bytes`` (the device's memory), ``limit_bytes`` (what the search was bounded by: the
  device's memory, or ``--memory-limit``), ``static_bytes`` (weights, gradients and optimizer state: what a
  training step holds whatever its batch), ``batches``: ``[{"batch", "peak_bytes" (null when it did not fit),
  "fits", "virtual_workers"}]`` (``virtual_workers``: how many model replicas sharing one copy of the
  weights — each with its own activations — fit at that batch: ``(limit − static) // (peak − static)``),
  ``max_batch`` (the largest batch that fits).
- ``compute``: ``batches``: ``[{"batch", "forward_ms", "backward_ms", "optimizer_ms", "iterations"}]``
  (medians over ``iterations`` timed steps after warm-up, the device synchronised around each phase).
- ``buckets``: ``world_size``, ``interconnect`` (``nvlink``, ``pcie``, ``network`` … as measured on),
  ``comm_model``: ``{"latency_ms", "ms_per_mb", "samples"}`` (all-reduce time = latency + size × ms_per_mb,
  fitted by least squares), ``caps``: ``[{"cap_mb", "buckets", "bucket_bytes", "allreduce_ms",
  "exposed_comm_ms", "overlap_tax_ms", "step_ms", "batch", "source"}]``: per DDP ``bucket_cap_mb``, the
  buckets (count, bytes each, in the order they are reduced), each bucket's all-reduce time, and from a
  trace of a training run at that cap (``source``, at local batch ``batch``; null without one) the median
  per step of the communication no compute hid (``exposed_comm_ms``), of the GPU time its slowdowns added
  (``overlap_tax_ms``, `traceql detect`'s time lost) and of the step's GPU time (``step_ms``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from traceql.collectors.errors import CollectError

FORMAT = "traceql-profile/1"
KINDS = ("memory", "compute", "buckets")


@dataclass(frozen=True)
class Field:
    """What a key must hold: ``what`` says it in an error message, ``test`` checks a value; ``each`` checks the
    items of a list one by one, ``keys`` the keys of an object."""

    what: str
    test: Callable[[Any], bool]
    each: Field | None = None
    keys: dict[str, Field] | None = None


def _finite(value: Any) -> bool:
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
    return Field(what, lambda v: (null and v is None) or (_finite(v) and (v > least if above else v >= least)))


def integer(least: int = 0, *, null: bool = False) -> Field:
    """An integer (not a boolean) of at least ``least``; ``null`` allows null."""
    what = f"an integer of at least {least}" + (" or null" if null else "")
    return Field(what, lambda v: (null and v is None) or (isinstance(v, int) and not isinstance(v, bool)
                                                         and v >= least))


def of_type(what: str, *types: type, null: bool = False) -> Field:
    """A value of ``types`` (a boolean only where ``bool`` is one of them); ``null`` allows null."""
    return Field(what + (" or null" if null else ""),
                 lambda v: (null and v is None) or (isinstance(v, types) and not (isinstance(v, bool)
                                                                                  and bool not in types)))


def list_of(item: Field) -> Field:
    """A list whose every item is ``item``."""
    return Field(f"a list, each item {item.what}", lambda v: isinstance(v, list), each=item)


def obj(keys: dict[str, Field], *, null: bool = False) -> Field:
    """An object with ``keys``; ``null`` allows null."""
    return Field("an object" + (" or null" if null else ""), lambda v: (null and v is None) or isinstance(v, dict),
                 keys=keys)


MS = number(0)  # a time in ms
MS_OR_NULL = number(0, null=True)
TEXT = of_type("a string", str)
ROWS = of_type("a list", list)
_REQUIRED = {
    "memory": {"memory_bytes": integer(1), "limit_bytes": integer(1), "static_bytes": integer(0), "batches": ROWS,
               "max_batch": integer(1, null=True)},
    "compute": {"batches": ROWS},
    "buckets": {"world_size": integer(1), "interconnect": TEXT,
                "comm_model": obj({"latency_ms": MS, "ms_per_mb": MS, "samples": integer(0)}, null=True),
                "caps": ROWS},
}
_ROWS = {
    "memory": {"batch": integer(1), "peak_bytes": integer(0, null=True), "fits": of_type("true or false", bool),
               "virtual_workers": integer(0)},
    "compute": {"batch": integer(1), "forward_ms": MS, "backward_ms": MS, "optimizer_ms": MS,
                "iterations": integer(1)},
    "buckets": {"cap_mb": number(0, above=True), "buckets": integer(0), "bucket_bytes": list_of(integer(0)),
                "allreduce_ms": list_of(MS), "exposed_comm_ms": MS_OR_NULL, "overlap_tax_ms": MS_OR_NULL,
                "step_ms": MS_OR_NULL, "batch": integer(1, null=True), "source": of_type("a string", str, null=True)},
}


def slug(gpu: str) -> str:
    """The GPU's name as a file name part: ``NVIDIA H200`` → ``nvidia-h200``."""
    return re.sub(r"[^a-z0-9]+", "-", gpu.lower()).strip("-") or "gpu"


def file_name(kind: str, gpu: str) -> str:
    """The file name of a profile: ``<kind>-<gpu slug>.json``."""
    return f"{kind}-{slug(gpu)}.json"


def shown(value: Any, width: int = 40) -> str:
    """A value as JSON writes it (``NaN``, ``Infinity``, ``"text"``, ``true``), cut to ``width`` characters."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= width else text[:width - 1] + "…"


def _check(obj: dict[str, Any], spec: dict[str, Field], where: str) -> None:
    for key, field in spec.items():
        if key not in obj:
            raise CollectError(f"{where}: missing key {key!r}")
        value = obj[key]
        if not field.test(value):
            raise CollectError(f"{where}: {key} must be {field.what}, got {shown(value)}")
        if field.each is not None:
            for i, item in enumerate(value):
                if not field.each.test(item):
                    raise CollectError(f"{where}: {key}[{i}] must be {field.each.what}, got {shown(item)}")
        if field.keys is not None and value is not None:
            _check(value, field.keys, f"{where}: {key}")


def _check_rows(kind: str, rows: list[Any], where: str) -> None:
    first: dict[Any, int] = {}
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise CollectError(f"{where}: entry {i} is not an object, got {shown(row)}")
        _check(row, _ROWS[kind], f"{where}: entry {i}")
        if kind == "compute" and row["forward_ms"] + row["backward_ms"] + row["optimizer_ms"] <= 0:
            raise CollectError(f"{where}: entry {i}: a step of 0 ms (forward_ms + backward_ms + optimizer_ms "
                               "must be above 0)")
        if kind != "buckets":
            if row["batch"] in first:
                raise CollectError(f"{where}: entry {i}: batch {row['batch']} is also entry {first[row['batch']]}"
                                   "; a batch is listed once")
            first[row["batch"]] = i


def validate(data: Any, where: str) -> dict[str, Any]:
    """``data`` if it is a profile of a known kind with every key its kind needs, each of the right type and
    range (numbers finite, times and sizes not negative, batches and counts at least 1); else CollectError
    naming ``where``, the entry and the key, and what is wrong."""
    if not isinstance(data, dict):
        raise CollectError(f"{where}: not a traceql profile (expected a JSON object with format {FORMAT!r}, "
                           f"got a JSON {'array' if isinstance(data, list) else type(data).__name__})")
    if data.get("format") != FORMAT:
        raise CollectError(f"{where}: not a traceql profile (its format must be {FORMAT!r}, got "
                           f"{shown(data.get('format'))})")
    if data.get("kind") not in KINDS:
        raise CollectError(f"{where}: unknown profile kind {shown(data.get('kind'))} (one of {', '.join(KINDS)})")
    _check(data, {"model": TEXT, "gpu": TEXT, **_REQUIRED[data["kind"]]}, where)
    _check_rows(data["kind"], data["batches"] if data["kind"] != "buckets" else data["caps"], where)
    return data


def profile(kind: str, model: str, gpu: str, **fields: Any) -> dict[str, Any]:
    """A profile object of ``kind`` (checked)."""
    return validate({"format": FORMAT, "kind": kind, "model": model, "gpu": gpu, **fields}, f"{kind} profile")
