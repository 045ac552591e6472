"""The compiled Kineto reader: the whole document decoded by msgspec into typed structs, then columns.

Each event becomes a small struct: a complete event ("ph": "X") keeps its category decoded and the fields the
model may use as their JSON text (``msgspec.Raw``, a slice of the document); every other phase is an empty
struct whose fields the decoder skips. Events are sorted into GPU activity, annotations and launches by
their category code (a polars column), and only the fields of those kept are decoded, one array per field.

:func:`decode` takes only what it reads exactly as ``kineto_events.stream`` does: a document that is not
strict JSON, repeats its ``traceEvents`` key, has an event that is not an object, an unknown phase, a
category that is not text, or a GPU field of an unexpected type gets ``None``, and the streaming reader
then reads it (and words what is wrong with it). Floats are decoded as their text (``float_hook=str``), as
the streaming reader keeps them.
"""

from __future__ import annotations

import gzip
import os
import zlib
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, TypeAlias, Union

import msgspec
import numpy as np
import polars as pl
from msgspec import UNSET, Raw, Struct, UnsetType

from traceql.analyzers.units import MIB
from traceql.sources.json_stream import BOM
from traceql.sources.kineto_events import ANNOTATION_CATS, GPU_CATS, GPU_INTS, LAUNCH_CATS, META_KEYS, Columns

I64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
NULL, ZERO = Raw(b"null"), Raw(b"0")
KEY = b'"traceEvents"'
CHUNK = 1 << 22
NUMBER_BYTES = b"0123456789.eE+-\n"  # a JSON value made of these alone is a number

# category → code: the GPU kinds, the annotations' categories, launches, cpu_op, any other category, and
# the events of another phase than "X"
LABELS = ("kernel", "memcpy", "memset", "sync", "user_annotation", "gpu_user_annotation")
NOTE, LAUNCH, CPU_OP, OTHER, NOT_X = 4, 6, 7, 8, 9
CODES: dict[Any, int] = {**{c: LABELS.index(k) for c, k in GPU_CATS.items()},
                         **{c: LABELS.index(c) for c in ANNOTATION_CATS}, **dict.fromkeys(LAUNCH_CATS, LAUNCH),
                         "cpu_op": CPU_OP, NOT_X: NOT_X}
# frequent categories, found as they are rather than lowercased
CODES |= {c: CODES.get(c.lower(), OTHER) for c in ("python_function", "Trace", "overhead", "cpu_instant_event")}


class _X(Struct, gc=False, tag_field="ph", tag="X"):
    """A complete event. The defaults are what a missing key reads as (``ev.get(key)``; ``dur`` 0)."""

    cat: str | None = ""
    name: Raw = NULL
    ts: Raw = NULL
    dur: Raw = ZERO
    pid: Raw = NULL
    args: Raw = NULL


class _Other(Struct, gc=False):
    cat: ClassVar[int] = NOT_X


# every other phase of the Trace Event Format
PHASES = "B E i I C b n e S T p F s t f P N O D M V v R c ( )".split()
_OTHERS = tuple(type(f"_Phase{i}", (_Other,), {}, tag_field="ph", tag=ph) for i, ph in enumerate(PHASES))


# an event: one of the tagged structs, one a phase, that the decoder picks from (the type checker sees their bases)
if TYPE_CHECKING:
    _Event: TypeAlias = _X | _Other
else:
    _EVENT_TYPES = (_X, *_OTHERS)
    _Event = Union[_EVENT_TYPES]  # noqa: UP007 - built from a tuple of classes


class _Trace(Struct, gc=False):
    events: list[_Event] | UnsetType = msgspec.field(default=UNSET, name="traceEvents")
    schemaVersion: Any = UNSET  # noqa: N815 - the trace's own keys
    cupti_version: Any = UNSET
    distributedInfo: Any = UNSET  # noqa: N815
    deviceProperties: Any = UNSET  # noqa: N815


class _GpuArgs(Struct, gc=False):
    device: I64 | None = None
    stream: I64 | None = None
    correlation: I64 | None = None
    grid: list[I64] | None = None
    block: list[I64] | None = None
    registers: I64 | None = msgspec.field(default=None, name="registers per thread")
    shared: I64 | None = msgspec.field(default=None, name="shared memory")
    bytes: I64 | None = None


class _LaunchArgs(Struct, gc=False):
    correlation: I64 | None = None


NO_ARGS = _GpuArgs()
_TRACE = msgspec.json.Decoder(_Trace, float_hook=str)
_VALUES = msgspec.json.Decoder(list[Any], float_hook=str)
_ANY = msgspec.json.Decoder(Any, float_hook=str)
_NAMES = msgspec.json.Decoder(list[str | None])
_GPU_ARGS = msgspec.json.Decoder(list[_GpuArgs | None])
_LAUNCH_ARGS = msgspec.json.Decoder(list[_LaunchArgs | None])


def decode(path: Path) -> Columns | None:
    """The trace's columns, or None where the streaming reader must read it."""
    data = read_bytes(path)
    if data is None:
        return None
    try:
        trace = _TRACE.decode(data)
        # a repeated key: the streaming reader reads each of its arrays, the decoder keeps the last
        return None if _repeated(data, trace) else _columns(trace)
    except (msgspec.MsgspecError, ValueError, RecursionError):
        return None


PEEK_BYTES = MIB  # a trace's metadata before its events: torch.profiler writes far less


def peek_meta(path: Path) -> dict[str, Any] | None:
    """The metadata keys of a trace that come before its events (read from its first bytes alone, decoded as
    :func:`decode` decodes them), when ``distributedInfo`` is among them; else None (it may follow the
    events: only the whole file tells)."""
    try:
        with path.open("rb") as fh:
            raw = fh.read(2)
            fh.seek(0)
            if raw == b"\x1f\x8b":
                with gzip.open(fh) as text:
                    head = text.read(PEEK_BYTES)
            else:
                head = fh.read(PEEK_BYTES)
    except (OSError, EOFError, ValueError, zlib.error):
        return None
    at = head.find(KEY)
    if at < 0:
        return None
    prefix = head[:at].removeprefix(BOM).rstrip()
    try:  # the object cut where its events begin, closed: it decodes only if the key was a top-level one
        trace = _TRACE.decode(prefix.removesuffix(b",") + b"}")
    except (msgspec.MsgspecError, ValueError, RecursionError):
        return None
    meta = {k: v for k in META_KEYS if (v := getattr(trace, k)) is not UNSET}
    return meta if "distributedInfo" in meta else None


def _repeated(data: bytes | bytearray, trace: _Trace) -> bool:
    """Whether the document names traceEvents twice (or as a key inside some value): searched for up to the
    first field of the array decoded, which the last traceEvents key precedes."""
    end = len(data)
    first = next((e for e in trace.events if type(e) is _X), None) if trace.events is not UNSET else None
    if first is not None:
        base = np.frombuffer(data, np.uint8).ctypes.data
        at = [np.frombuffer(r, np.uint8).ctypes.data - base for r in (first.name, first.ts, first.dur, first.args)]
        end = min((a for a in at if 0 <= a < end), default=end)
    return data.find(KEY, data.find(KEY, 0, end) + 1, end) >= 0


def read_bytes(path: Path) -> bytes | bytearray | None:
    """The file's bytes (gunzipped where compressed; a UTF-8 byte order mark first left out); None when they
    cannot be had."""
    try:
        with path.open("rb") as fh:
            if fh.read(2) == b"\x1f\x8b":
                fh.seek(0)
                data = bytearray()  # grown in place: never the whole text twice in memory
                with gzip.open(fh) as text:
                    while chunk := text.read(CHUNK):
                        data += chunk
            else:  # read, not mapped: a file cut short while mapped would kill the process (SIGBUS)
                fh.seek(0)
                data = bytearray(os.fstat(fh.fileno()).st_size)
                del data[fh.readinto(data):]
    except (OSError, EOFError, ValueError, zlib.error):
        return None
    if data.startswith(BOM):
        del data[:len(BOM)]
    return data


def _columns(trace: _Trace) -> Columns:
    meta = {k: v for k in META_KEYS if (v := getattr(trace, k)) is not UNSET}
    if trace.events is UNSET:
        return Columns(meta, has_events=False)
    events = trace.events
    codes = _codes(events)
    gpu, notes, launches = (_take(events, codes, test) for test in
                            (pl.col("c") < NOTE, pl.col("c").is_in([NOTE, NOTE + 1]), pl.col("c") == LAUNCH))
    cpu_events = int(codes.is_in([LAUNCH, CPU_OP, OTHER]).sum())
    pid: int | None = None
    for i in (codes == CPU_OP).arg_true():
        value = _ANY.decode(events[i].pid)
        if isinstance(value, int):
            pid = value
            break
    events.clear()  # the events not kept: their memory holds the columns
    labels = pl.Series(LABELS, dtype=pl.String)
    kinds = labels.gather(codes.filter(codes < NOTE))
    note_cats = labels.gather(codes.filter(codes.is_in([NOTE, NOTE + 1])))
    return Columns(meta, {"kind": kinds, **_times(gpu), **_gpu_args(gpu)}, {"cat": note_cats, **_times(notes)},
                   _launches(launches), pid, cpu_events)


def _codes(events: list) -> pl.Series:
    """Each event's category code; a category not found as it is gets its lowercase text's."""
    codes = list(map(CODES.get, map(attrgetter("cat"), events)))
    i = -1
    try:
        while True:
            i = codes.index(None, i + 1)
            codes[i] = CODES.get(str(events[i].cat).lower(), OTHER)
    except ValueError:
        return pl.Series("c", codes, dtype=pl.Int8)


def _take(events: list, codes: pl.Series, test: pl.Expr) -> list[_X]:
    return [events[i] for i in codes.to_frame().select(test.arg_true()).to_series().to_list()]


def _array(texts: list[Raw], decoder: msgspec.json.Decoder) -> list:
    """Decode the JSON texts of one field of many events as one array (between two nulls: one copy of them)."""
    return decoder.decode(b",".join([b"[null", *texts, b"null]"]))[1:-1]


def _numbers(texts: list[Raw]) -> pl.Series | list:
    """Values that are all JSON numbers: their text (what the decoder gives for a float, and the text of an
    int), split by polars; else the values decoded. Either way their nanoseconds are the same."""
    joined = b"\n".join(texts)
    if texts and not joined.translate(None, NUMBER_BYTES):
        return pl.Series([joined.decode()]).str.split("\n").explode()
    return _array(texts, _VALUES)


def _times(events: list[_X]) -> dict[str, Any]:
    return {"name": _array([e.name for e in events], _NAMES), "ts": _numbers([e.ts for e in events]),
            "dur": _numbers([e.dur for e in events])}


def _gpu_args(events: list[_X]) -> dict[str, Any]:
    """The GPU events' integer fields, and their grid and block as grid_x … block_z."""
    args = [a or NO_ARGS for a in _array([e.args for e in events], _GPU_ARGS)]
    cols: dict[str, Any] = {f: list(map(attrgetter(f), args)) for f in GPU_INTS}
    for name in ("grid", "block"):
        shapes = list(map(attrgetter(name), args))
        for i, axis in enumerate("xyz"):
            cols[f"{name}_{axis}"] = [s[i] if s is not None and len(s) > i else None for s in shapes]
    return cols


def _launches(events: list[_X]) -> dict[str, Any]:
    """The runtime calls that launched something: their correlation id (not 0) and start."""
    args = _array([e.args for e in events], _LAUNCH_ARGS)
    keep = [i for i, a in enumerate(args) if a is not None and a.correlation]
    return {"correlation": [args[i].correlation for i in keep], "ts": _numbers([events[i].ts for i in keep])}
