"""Chrome trace JSON (the Trace Event Format that Perfetto and chrome://tracing open) of a timeline: a process
per rank, a thread per GPU stream and one for the training steps, every kernel and memory operation a complete
event, the slowdown cases in red.

Events are made as JSON text by polars, a slice at a time, and streamed into the file; times are exact decimal
microseconds (``ns // 1000`` ``.`` ``ns % 1000``), never a float.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any, cast

import polars as pl

from traceql.errors import OptionError
from traceql.export.files import atomic_write

SUFFIXES = (".json", ".json.gz")
COLOURS = {"slowdown": "terrible", "comm": "thread_state_iowait"}  # reserved Chrome trace colour names (cname)
SLICE = 50_000  # events encoded and written at a time
RANK = ["run_id", "rank"]
KEY = ["run_id", "rank", "device", "stream", "start_ns", "end_ns", "name"]  # what aligns labels with kernels
LABELS = ["comm_overlap_ns", "concurrent_comm", "baseline_ns", "baseline_kind", "slowdown_ratio", "is_slowdown"]
EVENT = ["name", "cat", "pid", "tid", "cname", "start_ns", "duration_ns", "args"]


def check_output(path: Path) -> Path:
    """``path``, when its suffix names a Chrome trace JSON (``.json``, or ``.json.gz`` to gzip it)."""
    if not path.name.lower().endswith(SUFFIXES):
        raise OptionError("--output must end in .json or .json.gz (a Chrome trace JSON)", path=str(path))
    return path


def processes(ranks: pl.DataFrame, *activity: pl.DataFrame) -> pl.DataFrame:
    """``run_id, rank, pid``: one process per rank (of ``ranks`` or with activity), numbered from 1 in order."""
    frames = [f.select(pl.col("run_id").cast(pl.String), pl.col("rank").cast(pl.Int32)) for f in (ranks, *activity)]
    return (pl.concat(frames).unique().sort(RANK).with_row_index("pid", offset=1)
            .with_columns(pl.col("pid").cast(pl.Int64)))


def steps_tid(*activity: pl.DataFrame) -> int:
    """The thread of the training steps: 0, unless a stream has that id (then one past the largest)."""
    streams = pl.concat([f["stream"] for f in activity]).drop_nulls()
    return 0 if streams.is_empty() or not (streams == 0).any() else int(cast(int, streams.max())) + 1


def _colour(cat: pl.Expr) -> pl.Expr:
    return cat.replace_strict(COLOURS, default=None, return_dtype=pl.String)


def _finite(col: str) -> pl.Expr:
    return pl.when(pl.col(col).is_finite()).then(pl.col(col)).alias(col)


def _shape(what: str) -> pl.Expr:
    return pl.format("{}x{}x{}", *(pl.col(f"{what}_{axis}") for axis in "xyz")).alias(what)


def kernel_rows(kernels: pl.DataFrame, labels: pl.DataFrame, pids: pl.DataFrame) -> list[pl.DataFrame]:
    """Kernels as events (``EVENT`` columns): the compute kernels with detect's ``labels`` (one row each, in
    the kernels' order; a case is ``cat`` slowdown), then the comm and sync kernels."""
    k = kernels.join(pids, on=RANK, how="left", maintain_order="left")
    compute = k.filter(pl.col("kind") == "compute")
    if not labels.select(KEY).equals(compute.select(KEY)):
        raise RuntimeError("detect's labels do not line up with the trace's compute kernels")
    compute = compute.hstack(labels.select(*LABELS).with_columns(
        _finite("baseline_ns"), _finite("slowdown_ratio").round(4), pl.col("is_slowdown").fill_null(False)))
    common: list[pl.Expr | str] = [pl.col("name").alias("demangled"), _shape("grid"), _shape("block"), "device",
                                   "correlation_id", "step", "step_kind"]
    cat = pl.when(pl.col("is_slowdown")).then(pl.lit("slowdown")).otherwise(pl.col("kind"))
    out = [compute.select(pl.col("short_name").alias("name"), cat.alias("cat"), "pid", pl.col("stream").alias("tid"),
                          _colour(cat).alias("cname"), "start_ns", "duration_ns",
                          pl.struct(*common, *LABELS).alias("args"))]
    other = k.filter(pl.col("kind") != "compute")
    out.append(other.select(pl.col("short_name").alias("name"), pl.col("kind").alias("cat"), "pid",
                            pl.col("stream").alias("tid"), _colour(pl.col("kind")).alias("cname"), "start_ns",
                            "duration_ns", pl.struct(*common, "collective").alias("args")))
    return out


def memop_rows(memops: pl.DataFrame, pids: pl.DataFrame) -> list[pl.DataFrame]:
    """Memory copies and memsets as events: ``Memcpy DtoD``, ``Memset``; ``cat`` memcpy or memset."""
    m = memops.join(pids, on=RANK, how="left", maintain_order="left")
    name = pl.when(pl.col("kind") == "memset").then(pl.lit("Memset")).otherwise(pl.format("Memcpy {}", "copy_kind"))
    return [m.select(name.alias("name"), pl.col("kind").alias("cat"), "pid", pl.col("stream").alias("tid"),
                     pl.lit(None, pl.String).alias("cname"), "start_ns", "duration_ns",
                     pl.struct("bytes", "copy_kind", "device", "correlation_id", "step", "step_kind").alias("args"))]


def step_rows(kernels: pl.DataFrame, memops: pl.DataFrame, pids: pl.DataFrame, tid: int) -> list[pl.DataFrame]:
    """One event per step and rank on the steps thread: from the first start to the last end of the kernels
    and memory operations the step launched; ``step <i>`` or ``step <i> (isolated)``."""
    cols = [*RANK, "step", "step_kind", "start_ns", "end_ns"]
    steps = (pl.concat([kernels.select(cols), memops.select(cols)]).filter(pl.col("step").is_not_null())
             .group_by(*RANK, "step", "step_kind").agg(pl.col("start_ns").min(), pl.col("end_ns").max())
             .join(pids, on=RANK, how="left").sort("pid", "start_ns", "step"))
    isolated = pl.when(pl.col("step_kind") == "isolated").then(pl.lit(" (isolated)")).otherwise(pl.lit(""))
    return [steps.select(pl.format("step {}{}", "step", isolated).alias("name"), pl.lit("step").alias("cat"), "pid",
                         pl.lit(tid, pl.Int64).alias("tid"), pl.lit(None, pl.String).alias("cname"), "start_ns",
                         (pl.col("end_ns") - pl.col("start_ns")).alias("duration_ns"),
                         pl.struct("step", "step_kind").alias("args"))]


def metadata(pids: pl.DataFrame, rows: Sequence[pl.DataFrame]) -> list[dict[str, Any]]:
    """The ``M`` events: a name and sort index per process, a name per thread (``stream <id>``, ``steps``)."""
    out: list[dict[str, Any]] = []
    for run_id, rank, pid in pids.select("run_id", "rank", "pid").iter_rows():
        out.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": f"{run_id} rank {rank}"}})
        out.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": pid}})
    name = pl.when(pl.col("cat") == "step").then(pl.lit("steps")).otherwise(pl.format("stream {}", "tid"))
    threads = pl.concat([r.select("pid", "tid", name.alias("thread")) for r in rows]).unique().sort("pid", "tid")
    for pid, tid, thread in threads.iter_rows():
        out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": thread}})
        out.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                    "args": {"sort_index": -1 if thread == "steps" else tid}})
    return out


def _us(ns: pl.Expr) -> pl.Expr:
    """Nanoseconds as the exact text of microseconds: 1234567 → ``1234.567``."""
    a = ns.abs()
    return pl.concat_str(pl.when(ns < 0).then(pl.lit("-")).otherwise(pl.lit("")), (a // 1000).cast(pl.String),
                         pl.lit("."), (a % 1000).cast(pl.String).str.zfill(3))


def encode(rows: pl.DataFrame) -> pl.Series:
    """Each row (``EVENT`` columns) as the JSON text of a complete (``X``) event."""
    head = pl.struct("name", "cat", pl.lit("X").alias("ph"), "pid", "tid", "args").struct.json_encode()
    cname = pl.when(pl.col("cname").is_null()).then(pl.lit("")).otherwise(pl.format(',"cname":"{}"', "cname"))
    return rows.select(pl.concat_str(head.str.head(-1), cname, pl.lit(',"ts":'), _us(pl.col("start_ns")),
                                     pl.lit(',"dur":'), _us(pl.col("duration_ns")), pl.lit("}"))).to_series()


def counts(rows: Sequence[pl.DataFrame]) -> dict[str, int]:
    """How many events of each ``cat``."""
    total: Counter[str] = Counter()
    for r in rows:
        total.update(dict(r["cat"].value_counts().iter_rows()))
    return dict(sorted(total.items()))


def _pieces(meta: list[dict[str, Any]], rows: Sequence[pl.DataFrame]) -> Iterator[bytes]:
    if meta:
        yield ",\n".join(json.dumps(m, separators=(",", ":")) for m in meta).encode()
    for r in rows:
        for start in range(0, r.height, SLICE):
            yield encode(r.slice(start, SLICE)).str.join(",\n").item().encode()


def write_trace(path: Path, meta: list[dict[str, Any]], rows: Sequence[pl.DataFrame], other: dict[str, Any]) -> None:
    """Write the trace events to ``path`` atomically, streamed a slice at a time (gzipped for ``.json.gz``)."""

    def write(fh: IO[bytes]) -> None:
        gz = path.name.lower().endswith(".gz")
        out: gzip.GzipFile | IO[bytes] = gzip.GzipFile(fileobj=fh, mode="wb", mtime=0) if gz else fh
        out.write(b'{"traceEvents":[\n')
        sep = b""
        for piece in _pieces(meta, rows):
            out.write(sep + piece)
            sep = b",\n"
        tail = json.dumps(other, separators=(",", ":"))
        out.write(f'\n],"displayTimeUnit":"ns","otherData":{tail}}}\n'.encode())
        if out is not fh:
            out.close()  # flushes the gzip trailer; fh stays open

    atomic_write(path, write)
