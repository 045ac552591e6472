"""A Kineto trace's events → the columns the model keeps: GPU activity, annotations, runtime launches.

Two readers give the same :class:`Columns`: ``kineto_decode.decode``, compiled, for the documents it can
read exactly as :func:`stream` does, and :func:`stream`, which reads any JSON the standard library reads,
event by event (one event in memory at a time), checks each field in Python and words what is wrong with a
document. Non-integer numbers are kept as their decimal text, so that microsecond timestamps convert to
nanoseconds exactly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from traceql.sources.json_stream import stream_trace

GPU_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "memcpy": "memcpy", "gpu_memset": "memset",
            "memset": "memset", "cuda_sync": "sync"}
ANNOTATION_CATS = {"user_annotation", "gpu_user_annotation"}
LAUNCH_CATS = {"cuda_runtime", "cuda_driver", "runtime", "driver"}
GPU_INTS = ("device", "stream", "correlation", "registers", "shared", "bytes")
META_KEYS = ("schemaVersion", "cupti_version", "distributedInfo", "deviceProperties")


@dataclass
class Columns:
    """What a trace gives the model, as columns. ``gpu`` holds kind, name, ts, dur, :data:`GPU_INTS` and
    either ``grid``/``block`` lists (from :func:`stream`) or ``grid_x`` … ``block_z`` (from the compiled
    reader); ts and dur are ints or decimal text, as in the file. Columns are lists or polars Series."""

    meta: dict[str, Any]
    gpu: dict[str, Any] = field(default_factory=dict)
    notes: dict[str, Any] = field(default_factory=dict)
    launches: dict[str, Any] = field(default_factory=dict)
    pid: int | None = None
    cpu_events: int = 0
    has_events: bool = True  # the document has a traceEvents array


GPU_FIELDS = ("kind", "name", "ts", "dur", "device", "stream", "correlation", "grid", "block", "registers",
              "shared", "bytes")
NOTE_FIELDS = ("cat", "name", "ts", "dur")


def _int(value: Any) -> int | None:
    """An integer field of an event, or None for anything else (a string, a list, a bool)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _text(value: Any) -> str | None:
    """A name as text; a lone surrogate escape ("\\ud800", not UTF-8) becomes U+FFFD, as bytes that are not
    UTF-8 do."""
    if value is None:
        return None
    text = str(value)
    return text if text.isascii() else LONE_SURROGATE.sub("\ufffd", text)


def stream(path: Path) -> Columns:
    """Read the trace event by event: any JSON the standard library reads, with every field checked in Python;
    InputError for a document that cannot be read."""
    meta: dict[str, Any] = {}
    gpu: dict[str, list] = {f: [] for f in GPU_FIELDS}
    notes: dict[str, list] = {f: [] for f in NOTE_FIELDS}
    launches: dict[str, list] = {"correlation": [], "ts": []}
    pid = None
    cpu_events = 0
    for ev in stream_trace(path, meta):
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        cat = str(ev.get("cat", "")).lower()
        kind = GPU_CATS.get(cat)
        if kind is not None:
            args = ev["args"] if isinstance(ev.get("args"), dict) else {}
            grid, block = (v if isinstance(v, (list, tuple)) else (None,) * 3
                           for v in (args.get("grid"), args.get("block")))
            for f, v in zip(GPU_FIELDS, (kind, _text(ev.get("name")), ev.get("ts"), ev.get("dur", 0),
                                         *(_int(args.get(a)) for a in ("device", "stream", "correlation")),
                                         [_int(x) for x in grid], [_int(x) for x in block],
                                         *(_int(args.get(a)) for a in ("registers per thread", "shared memory",
                                                                       "bytes"))), strict=True):
                gpu[f].append(v)
        elif cat in ANNOTATION_CATS:
            for f, v in zip(NOTE_FIELDS, (cat, _text(ev.get("name")), ev.get("ts"), ev.get("dur", 0)), strict=True):
                notes[f].append(v)
        else:
            cpu_events += 1
            if cat in LAUNCH_CATS and isinstance(ev.get("args"), dict) and _int(ev["args"].get("correlation")):
                launches["correlation"].append(ev["args"]["correlation"])
                launches["ts"].append(ev.get("ts"))
            if pid is None and isinstance(ev.get("pid"), int) and cat == "cpu_op":
                pid = ev["pid"]
    return Columns(meta, gpu, notes, launches, pid, cpu_events, meta.pop("_has_events", False))
