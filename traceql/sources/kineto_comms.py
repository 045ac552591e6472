"""What a torch.profiler trace records of its collectives' sizes (``analyzers.collectives``' ``BY_KERNEL`` and
``BY_CALL`` frames).

PyTorch records a collective three ways, by version: its NCCL kernel's own arguments (``Collective name``,
``In msg nelems``, ``Out msg nelems``, ``dtype``, ``Group size``: torch 2.2 and later), the
``record_param_comms`` call that issued it (the same arguments), and the ``nccl:<op>`` annotation around the
call (``Input Dims`` and ``Input type`` of the tensor alone, older versions). The size is the larger of the
input and the output (nccl-tests' size of an all-gather is its output, of a reduce-scatter its input), in
bytes of the element type. A trace that records none gives empty frames.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import msgspec
import polars as pl
from msgspec import Raw, Struct

from traceql.model.names import COMM_NAME_REGEX
from traceql.sources.kineto_decode import read_bytes
from traceql.sources.kineto_file import ns_from_text

BYTES = {"float": 4, "float32": 4, "f32": 4, "half": 2, "float16": 2, "f16": 2, "bfloat16": 2, "bf16": 2,
         "double": 8, "float64": 8, "f64": 8, "long": 8, "int64": 8, "long int": 8, "int": 4, "int32": 4,
         "short": 2, "int16": 2, "byte": 1, "uint8": 1, "unsigned char": 1, "char": 1, "int8": 1,
         "signed char": 1, "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1, "uint64": 8, "uint32": 4}
FROM_KERNEL = "torch.profiler (kernel)"
FROM_CALL = "torch.profiler (call)"


class _Head(Struct, gc=False):
    """An event's name alone (its other fields skipped), to tell which events to decode."""

    name: Any = None


class _Doc(Struct, gc=False):
    traceEvents: list[Raw] = []  # noqa: N815 - the trace's own key: each event's text


class _Heads(Struct, gc=False):
    traceEvents: list[_Head | None] = []  # noqa: N815


_DOC, _HEADS = msgspec.json.Decoder(_Doc), msgspec.json.Decoder(_Heads)
_EVENT = msgspec.json.Decoder(Any, float_hook=str)  # floats as their text: microseconds to ns exactly
COMM = re.compile(COMM_NAME_REGEX, re.IGNORECASE)


def dtype_bytes(dtype: Any) -> int | None:
    """Bytes of one element of a PyTorch dtype as a trace names it (``Float``, ``c10::BFloat16``, ``long
    int``); None when unknown."""
    if not isinstance(dtype, str):
        return None
    name = re.sub(r"^(c10::|torch\.|at::)", "", dtype.strip()).lower()
    return BYTES.get(name)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _size(args: dict[str, Any]) -> tuple[int | None, str | None, int | None]:
    """(bytes, dtype, group size) of a collective's record."""
    dtype = args.get("dtype")
    counts = [c for c in (_int(args.get("In msg nelems")), _int(args.get("Out msg nelems"))) if c is not None]
    if not counts:  # an nccl:* annotation: its tensor's dims and type
        dims, types = args.get("Input Dims"), args.get("Input type")
        if isinstance(dims, list) and dims and isinstance(dims[0], list) and all(_int(d) is not None for d in dims[0]):
            counts = [math.prod(dims[0])]
            dtype = types[0] if isinstance(types, list) and types else None
    width = dtype_bytes(dtype)
    group = _int(args.get("Group size"))
    if not counts or width is None:
        return None, dtype if isinstance(dtype, str) else None, group
    return max(counts) * width, dtype, group


def read(path: Path, run_id: str, rank: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The sizes ``path`` records: by kernel (its correlation id) and by call (its CPU interval), as rows of
    rank ``rank`` of run ``run_id``; empty frames for a trace that records none or cannot be read."""
    kernels: dict[str, list] = {"correlation_id": [], "bytes": [], "dtype": [], "group_size": []}
    calls: dict[str, list] = {"ts": [], "dur": [], "bytes": [], "dtype": [], "group_size": []}
    data = read_bytes(path)
    try:  # each event's name, then only the events that may be collectives decoded whole
        heads = _HEADS.decode(data).traceEvents if data is not None else []
        texts = _DOC.decode(data).traceEvents if data is not None else []
    except (msgspec.MsgspecError, ValueError, RecursionError):  # the streaming reader reads such documents
        heads, texts = [], []
    for head, text in zip(heads, texts, strict=True):
        name = head.name if head is not None else None
        if not isinstance(name, str) or not (name == "record_param_comms" or "ccl" in name.lower()):
            continue
        ev = _EVENT.decode(text)
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        name, cat = ev["name"], str(ev.get("cat", "")).lower()
        call = name == "record_param_comms" or name.startswith("nccl:")
        if not call and not (cat == "kernel" and COMM.search(name)):
            continue
        args = ev["args"] if isinstance(ev.get("args"), dict) else {}
        size, dtype, group = _size(args)
        if size is None:
            continue
        if call:
            for key, value in zip(calls, (ev.get("ts"), ev.get("dur", 0), size, dtype, group), strict=True):
                calls[key].append(str(value))
        elif _int(args.get("correlation")) is not None:
            for key, value in zip(kernels, (args["correlation"], size, dtype, group), strict=True):
                kernels[key].append(value)
    by_kernel = pl.DataFrame(kernels, schema={"correlation_id": pl.Int64, "bytes": pl.Int64, "dtype": pl.String,
                                              "group_size": pl.Int32}, strict=False)
    by_call = (pl.DataFrame(calls, schema=dict.fromkeys(calls, pl.String))
               .select(ns_from_text("ts").alias("start_ns"), (ns_from_text("ts") + ns_from_text("dur")).alias("end_ns"),
                       pl.col("bytes").cast(pl.Int64, strict=False), pl.col("dtype").replace("None", None),
                       pl.col("group_size").cast(pl.Int32, strict=False)))
    tag = (pl.lit(run_id).alias("run_id"), pl.lit(rank, pl.Int32).alias("rank"))
    return (by_kernel.with_columns(*tag, pl.lit(FROM_KERNEL).alias("size_from")),
            by_call.with_columns(*tag, pl.lit(FROM_CALL).alias("size_from")))
