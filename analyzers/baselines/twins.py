"""Twin baselines: each compute kernel compared with the same kernel at the same place of the training step,
in an isolated reference (an isolated run, or the in-run steps executed with communication off).

Per step, the compute kernels in launch order form a sequence of keys (demangled name + grid + block). The
reference's steps are aligned with one canonical reference step, their most common sequence; the median
duration of each canonical position over the reference's steps is that position's twin baseline. A step of
the trace is aligned with the canonical step by longest matching blocks (``difflib.SequenceMatcher``,
autojunk off); a kernel's twin is the position it aligns with. Kernels that only the trace has (DDP's bucket
copies and gradient scaling) align with nothing: they have no twin. Identical sequences are aligned once.

Where the trace or the reference has no steps, a kernel falls back to the *key median*: the median duration
of the reference's kernels with the same key. Frames carry ``key``, ``step``, ``launch_ns``, ``start_ns`` and
``duration_ns``; target frames a row id ``_row`` too.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from difflib import SequenceMatcher

import numpy as np
import polars as pl

TWIN, KEY_MEDIAN, NONE = "twin", "key-median", "none"
REFERENCE = "reference"  # a kernel of the in-run reference itself (an isolated step): never a case
OUT_SCHEMA = {"_row": pl.UInt32, "baseline_ns": pl.Float64, "baseline_kind": pl.String, "twin_pos": pl.Int64}


def align(seq: tuple, canonical: tuple) -> np.ndarray:
    """For each element of ``seq``, the index of the element of ``canonical`` it aligns with, else -1."""
    out = np.full(len(seq), -1, np.int64)
    for i, j, n in SequenceMatcher(None, seq, canonical, autojunk=False).get_matching_blocks():
        out[i:i + n] = np.arange(j, j + n)
    return out


STEP = ["run_id", "rank", "step", "step_kind"]  # one step of one rank
INPUTS = ["_row", *STEP, "key", "launch_ns", "start_ns", "duration_ns"]  # what a target frame needs


@dataclass
class _Steps:
    """The kernels of a frame that are in steps, in step then launch order, as arrays; ``steps`` has one row
    per step of a rank (``by`` first) with ``offset`` and ``len``, its slice of the arrays."""

    steps: pl.DataFrame
    key_ids: np.ndarray
    durations: np.ndarray
    rows: np.ndarray | None

    def slice(self, column: np.ndarray, i: int) -> np.ndarray:
        return column[self._offsets[i]:self._offsets[i] + self._lens[i]]

    def __post_init__(self) -> None:
        self._offsets = self.steps["offset"].to_numpy()
        self._lens = self.steps["len"].to_numpy()


def _steps(frame: pl.DataFrame, by: list[str], *, rows: bool) -> _Steps:
    group = [*by, *(c for c in STEP if c not in by)]
    ordered = frame.filter(pl.col("step").is_not_null()).sort([*group, "launch_ns", "start_ns"])
    steps = ordered.group_by(group, maintain_order=True).len().with_columns(
        (pl.col("len").cum_sum() - pl.col("len")).alias("offset"))
    return _Steps(steps, ordered["key_id"].to_numpy(), ordered["duration_ns"].cast(pl.Float64).to_numpy(),
                  ordered["_row"].to_numpy() if rows else None)


class _Reference:
    """The canonical step of one reference partition and each position's median duration."""

    def __init__(self, steps: _Steps, indices: list[int]) -> None:
        seqs = [steps.slice(steps.key_ids, i) for i in indices]
        counts = Counter(s.tobytes() for s in seqs)  # a step's sequence, hashed as its bytes
        canonical = counts.most_common(1)[0][0]  # ties: the earliest step
        self.canonical = tuple(np.frombuffer(canonical, seqs[0].dtype).tolist())
        self.first = next(i for i, s in zip(indices, seqs, strict=True) if s.tobytes() == canonical)
        self._cache: dict[bytes, np.ndarray] = {}
        durations = np.full((len(seqs), len(self.canonical)), np.nan)
        for row, (i, seq) in enumerate(zip(indices, seqs, strict=True)):
            pos = self.positions(seq)
            hit = pos >= 0
            durations[row, pos[hit]] = steps.slice(steps.durations, i)[hit]
        self.medians = np.nanmedian(durations, axis=0)

    def positions(self, seq: np.ndarray) -> np.ndarray:
        """Each kernel's position in the canonical step (-1: none); identical sequences are aligned once."""
        key = seq.tobytes()
        if key not in self._cache:
            self._cache[key] = align(tuple(seq.tolist()), self.canonical)
        return self._cache[key]


def _key_ids(*frames: pl.DataFrame) -> pl.DataFrame:
    """``key, key_id``: one integer per key of the frames (the sequences aligned are of these ids)."""
    keys = pl.concat([f["key"] for f in frames]).unique(maintain_order=True)
    return pl.DataFrame({"key": keys, "key_id": pl.int_range(len(keys), dtype=pl.Int64, eager=True)})


def _with_key_ids(target: pl.DataFrame, reference: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    ids = _key_ids(target, reference)
    # a kernel with no key (its name or shape unknown) has an id too: such kernels align with each other
    return (target.join(ids, on="key", how="left", maintain_order="left", nulls_equal=True),
            reference.join(ids, on="key", how="left", maintain_order="left", nulls_equal=True))


def _references(reference: _Steps, by: list[str]) -> dict[tuple, _Reference]:
    """The reference of each partition (its values of ``by``) that has steps."""
    parts: dict[tuple, list[int]] = {}
    for i, values in enumerate(reference.steps.select(by).iter_rows() if by else [()] * reference.steps.height):
        parts.setdefault(values, []).append(i)
    return {part: _Reference(reference, indices) for part, indices in parts.items()}


def twin_baselines(target: pl.DataFrame, reference: pl.DataFrame, by: list[str] | None = None) -> pl.DataFrame:
    """``_row, baseline_ns, baseline_kind, twin_pos`` for the target kernels in steps: the twin baseline, or
    ``none`` when nothing of the reference partition (the same values of ``by``) aligns with them."""
    by = by or []
    needed = list(dict.fromkeys([*by, *STEP, "key", "launch_ns", "start_ns", "duration_ns"]))
    itself = target is reference  # a trace aligned with its own steps: they are gathered once
    target, reference = _with_key_ids(target.select(*needed, "_row"), reference.select(needed))
    mine = _steps(target, by, rows=True)
    refs = _references(mine if itself else _steps(reference, by, rows=False), by)
    positions, baselines = [], []
    parts = mine.steps.select(by).iter_rows() if by else [()] * mine.steps.height
    for i, part in enumerate(parts):
        ref, n = refs.get(part), mine.steps["len"][i]
        pos = ref.positions(mine.slice(mine.key_ids, i)) if ref is not None else np.full(n, -1, np.int64)
        positions.append(pos)
        baselines.append(np.where(pos >= 0, ref.medians[np.maximum(pos, 0)], np.nan) if ref is not None
                         else np.full(n, np.nan))
    if not positions:
        return pl.DataFrame(schema=OUT_SCHEMA)
    pos = np.concatenate(positions)
    twin = pl.col("twin_pos") >= 0
    return pl.DataFrame({"_row": mine.rows, "twin_pos": pos}).with_columns(
        pl.col("_row").cast(pl.UInt32),
        pl.Series("baseline_ns", np.concatenate(baselines)).fill_nan(None),
        pl.when(twin).then(pl.lit(TWIN)).otherwise(pl.lit(NONE)).alias("baseline_kind"),
        pl.when(twin).then(pl.col("twin_pos")).alias("twin_pos"),
    ).select(list(OUT_SCHEMA))


def canonical_steps(reference: pl.DataFrame, by: list[str] | None = None) -> pl.DataFrame:
    """The canonical step of each partition of ``reference`` (its values of ``by``), one row per position:
    ``*by, step, twin_pos, key, baseline_ns``; ``step`` is the first reference step whose sequence it is,
    ``baseline_ns`` the position's twin baseline. :func:`twin_baselines` aligns target steps with these."""
    by = by or []
    needed = list(dict.fromkeys([*by, *STEP, "key", "launch_ns", "start_ns", "duration_ns"]))
    frame = reference.select(needed)
    ids = _key_ids(frame)
    steps = _steps(frame.join(ids, on="key", how="left", maintain_order="left", nulls_equal=True), by, rows=False)
    parts = [steps.steps.slice(ref.first, 1).select(*by, "step").join(pl.DataFrame({
        "twin_pos": np.arange(len(ref.canonical), dtype=np.int64), "key_id": np.array(ref.canonical, np.int64),
        "baseline_ns": ref.medians}), how="cross") for ref in _references(steps, by).values()]
    empty = frame.select(*by, "step").head(0).join(
        pl.DataFrame(schema={"twin_pos": pl.Int64, "key_id": pl.Int64, "baseline_ns": pl.Float64}), how="cross")
    return pl.concat([empty, *parts]).join(ids, on="key_id", how="left", maintain_order="left").select(
        *by, "step", "twin_pos", "key", "baseline_ns")


def key_medians(target: pl.DataFrame, reference: pl.DataFrame) -> pl.DataFrame:
    """``_row, baseline_ns, baseline_kind, twin_pos``: the median duration of the reference's kernels of the
    same key (``key-median``), ``none`` where the reference has no such key."""
    medians = reference.group_by("key").agg(pl.col("duration_ns").median().alias("baseline_ns"))
    return target.select("_row", "key").join(medians, on="key", how="left", maintain_order="left").select(
        pl.col("_row").cast(pl.UInt32), pl.col("baseline_ns").cast(pl.Float64),
        pl.when(pl.col("baseline_ns").is_not_null()).then(pl.lit(KEY_MEDIAN)).otherwise(pl.lit(NONE))
        .alias("baseline_kind"),
        pl.lit(None, pl.Int64).alias("twin_pos"))


def no_baseline(rows: pl.DataFrame, kind: str = NONE) -> pl.DataFrame:
    """``_row, baseline_ns, baseline_kind, twin_pos`` for rows that get no baseline (``kind`` says why)."""
    return rows.select(pl.col("_row").cast(pl.UInt32), pl.lit(None, pl.Float64).alias("baseline_ns"),
                       pl.lit(kind).alias("baseline_kind"), pl.lit(None, pl.Int64).alias("twin_pos"))


def reference_baselines(target: pl.DataFrame, reference: pl.DataFrame, by: list[str] | None = None) -> pl.DataFrame:
    """Every target kernel's baseline: twins when both sides have steps (kernels outside the steps: none),
    else key medians."""
    stepped = target["step"].is_not_null().any() and reference["step"].is_not_null().any()
    if not stepped:
        return key_medians(target, reference)
    twins = twin_baselines(target, reference, by)
    rest = target.select("_row").join(twins.select("_row"), on="_row", how="anti")
    return pl.concat([twins, no_baseline(rest)]).sort("_row")
