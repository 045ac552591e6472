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

import re
from typing import Any

from traceql.collectors.errors import CollectError

FORMAT = "traceql-profile/1"
KINDS = ("memory", "compute", "buckets")
_REQUIRED = {
    "memory": {"memory_bytes": (int,), "limit_bytes": (int,), "static_bytes": (int,), "batches": (list,),
               "max_batch": (int, type(None))},
    "compute": {"batches": (list,)},
    "buckets": {"world_size": (int,), "interconnect": (str,), "comm_model": (dict, type(None)), "caps": (list,)},
}
_ROWS = {
    "memory": {"batch": (int,), "peak_bytes": (int, type(None)), "fits": (bool,), "virtual_workers": (int,)},
    "compute": {"batch": (int,), "forward_ms": (int, float), "backward_ms": (int, float),
                "optimizer_ms": (int, float), "iterations": (int,)},
    "buckets": {"cap_mb": (int, float), "buckets": (int,), "bucket_bytes": (list,), "allreduce_ms": (list,),
                "exposed_comm_ms": (int, float, type(None)), "overlap_tax_ms": (int, float, type(None)),
                "step_ms": (int, float, type(None)), "batch": (int, type(None)), "source": (str, type(None))},
}


def slug(gpu: str) -> str:
    """The GPU's name as a file name part: ``NVIDIA H200`` → ``nvidia-h200``."""
    return re.sub(r"[^a-z0-9]+", "-", gpu.lower()).strip("-") or "gpu"


def file_name(kind: str, gpu: str) -> str:
    return f"{kind}-{slug(gpu)}.json"


def _check(obj: dict[str, Any], spec: dict[str, tuple[type, ...]], where: str) -> None:
    for key, types in spec.items():
        if key not in obj:
            raise CollectError(f"{where}: missing key {key!r}")
        value = obj[key]
        if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
            kinds = " or ".join("null" if t is type(None) else t.__name__ for t in types)
            raise CollectError(f"{where}: {key} must be {kinds}, got {type(value).__name__}")


def validate(data: Any, where: str) -> dict[str, Any]:
    """``data`` if it is a profile of a known kind with every key its kind needs, of the right type; else
    CollectError naming ``where`` and what is wrong."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CollectError(f"{where}: not a traceql profile (its format must be {FORMAT!r})")
    if data.get("kind") not in KINDS:
        raise CollectError(f"{where}: unknown profile kind {data.get('kind')!r} (one of {', '.join(KINDS)})")
    _check(data, {"model": (str,), "gpu": (str,), **_REQUIRED[data["kind"]]}, where)
    rows = data["batches"] if data["kind"] != "buckets" else data["caps"]
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise CollectError(f"{where}: entry {i} is not an object")
        _check(row, _ROWS[data["kind"]], f"{where}: entry {i}")
    return data


def profile(kind: str, model: str, gpu: str, **fields: Any) -> dict[str, Any]:
    """A profile object of ``kind`` (checked)."""
    return validate({"format": FORMAT, "kind": kind, "model": model, "gpu": gpu, **fields}, f"{kind} profile")
