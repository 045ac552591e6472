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

Every time in ms is finite, not negative and at most a day (``MOST_MS``).
"""

from __future__ import annotations

import re
from typing import Any

from traceql.collectors.errors import CollectError
from traceql.collectors.fields import check, integer, list_of, number, obj, of_type, shown

FORMAT = "traceql-profile/1"
KINDS = ("memory", "compute", "buckets")


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


MOST_MS = 86_400_000  # a day: a time past it in a profile is a typing mistake or a damaged file
_TIMES = {"memory": (), "compute": ("forward_ms", "backward_ms", "optimizer_ms"),
          "buckets": ("allreduce_ms", "exposed_comm_ms", "overlap_tax_ms", "step_ms")}


def slug(gpu: str) -> str:
    """The GPU's name as a file name part: ``NVIDIA H200`` → ``nvidia-h200``."""
    return re.sub(r"[^a-z0-9]+", "-", gpu.lower()).strip("-") or "gpu"


def file_name(kind: str, gpu: str) -> str:
    """The file name of a profile: ``<kind>-<gpu slug>.json``."""
    return f"{kind}-{slug(gpu)}.json"


def _check_times(data: dict[str, Any], keys: tuple[str, ...], where: str) -> None:
    """CollectError for a time of ``keys`` (a number, or a list of them) past :data:`MOST_MS`: no profiled
    phase lasts that long, and `solve`'s predictions from it would round every throughput to 0."""
    for key in keys:
        values = data.get(key)
        for i, value in enumerate(values if isinstance(values, list) else [values]):
            if value is not None and value > MOST_MS:
                name = f"{key}[{i}]" if isinstance(values, list) else key
                raise CollectError(f"{where}: {name} must be at most {MOST_MS:,} ms (a day), got {shown(value)}: "
                                   "no profiled step lasts that long (edited by hand?)")


def _check_rows(kind: str, rows: list[Any], where: str) -> None:
    first: dict[Any, int] = {}
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise CollectError(f"{where}: entry {i} is not an object, got {shown(row)}")
        check(row, _ROWS[kind], f"{where}: entry {i}")
        _check_times(row, _TIMES[kind], f"{where}: entry {i}")
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
    check(data, {"model": TEXT, "gpu": TEXT, **_REQUIRED[data["kind"]]}, where)
    if data["kind"] == "buckets" and data["comm_model"] is not None:
        _check_times(data["comm_model"], ("latency_ms", "ms_per_mb"), f"{where}: comm_model")
    _check_rows(data["kind"], data["batches"] if data["kind"] != "buckets" else data["caps"], where)
    return data


def profile(kind: str, model: str, gpu: str, **fields: Any) -> dict[str, Any]:
    """A profile object of ``kind`` (checked)."""
    return validate({"format": FORMAT, "kind": kind, "model": model, "gpu": gpu, **fields}, f"{kind} profile")
