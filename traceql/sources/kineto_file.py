"""One torch.profiler (Kineto) trace parsed: its metadata and its GPU events, annotations and launches as
frames (:class:`KinetoFile`), the ranks of traces given together (:func:`assign`) and the timestamps' text as
integer nanoseconds (:func:`ns_from_text`). What the reader (``kineto``), its plan and its helper processes
share."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import polars as pl

from traceql.errors import InputError, SchemaError
from traceql.sources.kineto_decode import decode
from traceql.sources.kineto_events import GPU_INTS, stream
from traceql.sources.ranks import MAX_RANK, name_rank_note, rank_from_name, run_name, valid_rank


@dataclass
class KinetoFile:
    """One parsed Kineto trace: its metadata and its GPU events, annotations and launches as frames."""

    path: Path
    meta: dict[str, Any]
    gpu: pl.DataFrame
    notes: pl.DataFrame
    launches: pl.DataFrame
    pid: int | None = None

    def rank(self) -> tuple[int | None, str, str | None]:
        """Its rank, how it is known (``distributedInfo`` or ``file name``; None: neither tells) and a warning
        when its ``distributedInfo`` or its name gives a rank that no rank can be."""
        info = self.meta.get("distributedInfo")
        if isinstance(info, str):  # some tools store it as a Python repr
            try:
                info = ast.literal_eval(info)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                info = None
        note = None
        if isinstance(info, dict) and "rank" in info:
            rank = valid_rank(info["rank"])
            if rank is not None:
                return rank, "distributedInfo", None
            shown = str(info["rank"])
            shown = shown if len(shown) <= 24 else f"{shown[:20]}..."
            note = (f"warning: {self.path}: distributedInfo.rank {shown!r} is not a rank (an integer from 0 to "
                    f"{MAX_RANK}): ignored")
        rank = rank_from_name(self.path)
        return rank, "file name", note or name_rank_note(self.path)


TIMES = {"ts": pl.String, "dur": pl.String}  # ints or decimal text, both as text for ns_from_text
SHAPE = [f"{d}_{a}" for d in ("grid", "block") for a in "xyz"]


def _gpu(cols: dict[str, list]) -> pl.DataFrame:
    """The GPU events' frame: kind, name, ts, dur (text), the integer fields and grid_x … block_z."""
    if "grid" in cols:  # lists of any length from the streaming reader: their first three items
        g = pl.DataFrame(cols, schema_overrides={**TIMES, "grid": pl.List(pl.Int64), "block": pl.List(pl.Int64),
                                                 "name": pl.String}, strict=False)
        return g.with_columns(pl.col(d).list.get(i, null_on_oob=True).alias(f"{d}_{a}")
                              for d in ("grid", "block") for i, a in enumerate("xyz")).drop("grid", "block")
    ints = {c: pl.Int64 for c in (*GPU_INTS, *SHAPE)}
    return pl.DataFrame(cols, schema={"kind": pl.String, "name": pl.String, **TIMES, **ints}, strict=False)


def parse(path: Path, *, cpu_run: bool = False) -> KinetoFile:
    """Read one trace file into a :class:`KinetoFile`; InputError/SchemaError for what cannot be used."""
    cols = decode(path) or stream(path)
    if not cols.has_events:
        raise InputError("a JSON file, but not a Chrome/Kineto trace (no traceEvents array)", path=str(path))
    if not len(cols.gpu["kind"]) and not cpu_run:
        raise SchemaError(
            f"no GPU activity in this trace ({cols.cpu_events} CPU events): was torch.profiler run with "
            "ProfilerActivity.CUDA?", path=str(path))
    notes = pl.DataFrame(cols.notes, schema_overrides=TIMES, strict=False)
    launches = pl.DataFrame(cols.launches, schema_overrides={"ts": pl.String}, strict=False)
    return KinetoFile(path, cols.meta, _gpu(cols.gpu), notes, launches, cols.pid)


MAX_US = 9_000_000_000_000_000  # µs; beyond, nanoseconds leave int64


def ns_from_text(col: str) -> pl.Expr:
    """µs as text ("4438525877947.739") or number → int64 ns, exact for up to 3 decimals, rounded beyond;
    null for anything else (no number, NaN, an exponent, out of range), which validation then drops."""
    text = pl.col(col).cast(pl.String)
    parts = text.str.split_exact(".", 1)
    whole = parts.struct.field("field_0").cast(pl.Int64, strict=False)
    whole = pl.when(whole.abs() <= MAX_US).then(whole)
    frac = parts.struct.field("field_1").fill_null("").str.pad_end(4, "0")
    digits = pl.when(frac.str.contains(r"^[0-9]+$")).then(frac)
    rounding = (digits.str.slice(3, 1).cast(pl.Int64, strict=False) >= 5).cast(pl.Int64)
    fraction = digits.str.slice(0, 3).cast(pl.Int64, strict=False) + rounding
    # the fraction has the sign of the whole number: "-0.703" is -703 ns, "-12.5" is -12,500 ns
    return whole * 1000 + pl.when(text.str.starts_with("-")).then(-fraction).otherwise(fraction)


def assign(files: list[KinetoFile], run_id: str | None = None) -> tuple[list[tuple[KinetoFile, str, int, str]],
                                                                           list[str]]:
    """Ranks and run id of Kineto files given together: one run, ranks from distributedInfo or names (else
    the files' order); and the warnings on ranks that could not be used."""
    known = [f.rank() for f in files]
    ranks, how = [r for r, _, _ in known], [h for _, h, _ in known]
    notes = [n for _, _, n in known if n]
    if None in ranks:
        ranks, how = list(range(len(files))), ["file order"] * len(files)
    numbered = cast("list[int]", ranks)  # every rank known, or the files' order
    seen: dict[int, Path] = {}
    for f, r in zip(files, numbered, strict=True):
        if r in seen:
            raise InputError(f"claims rank {r}, as {seen[r]} does: give one trace per rank", path=str(f.path))
        seen[r] = f.path
    run_id = run_id or run_name([f.path for f in files])
    return [(f, run_id, r, h) for f, r, h in zip(files, numbered, how, strict=True)], notes
