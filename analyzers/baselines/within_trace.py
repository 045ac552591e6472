"""Within-trace estimates of a kernel's unslowed duration, from the trace alone (no isolated reference).

Only replicas lend each other a reference (``replicas``): each group of alike ranks of a run has its steps
aligned with its own canonical step (``twins``: the same alignment, the trace as its own reference), so each
kernel has a *position*, the same kernel at the same place of every step and replica.

- ``position_clean_ns``: median duration of the position's instances that no communication overlapped;
- ``position_min_ns``, ``position_min_frac``: the position's shortest instance, and its least overlap fraction;
- ``key_clean_ns``: median duration of the key's unoverlapped instances anywhere in the replicas' steps;
- ``corrected_ns``: where every instance of a position was overlapped, the intercept of its duration against
  its overlap (``correction``).

``estimate_ns`` takes the first that holds, and ``reference_kind`` says how good it is:

=================  ================================================================  ================
estimate_source    what                                                              reference_kind
=================  ================================================================  ================
position           the position's clean median                                       clean
position-min       its shortest instance, overlapped under a tenth                   contaminated
key                the key's clean median elsewhere in the step                      borrowed
corrected          the intercept of duration against overlap                         corrected
position-min       its shortest instance (an upper bound of the unslowed duration)   contaminated
none               nothing: no steps, and no unoverlapped instance of the key        none
=================  ================================================================  ================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np
import polars as pl

from traceql.analyzers.baselines.correction import corrected_positions
from traceql.analyzers.baselines.kinds import BORROWED, CLEAN, CONTAMINATED, CORRECTED, NONE
from traceql.analyzers.baselines.medians import group_medians
from traceql.analyzers.baselines.replicas import replica_groups
from traceql.analyzers.baselines.sequences import canonical_steps, positions, step_sequences

NEARLY_CLEAN = 0.1  # a position's shortest instance overlapped less than this is a fair reference
PART = ["run_id", "replica"]  # the ranks that lend each other a reference
POSITION = [*PART, "position"]
KINDS = {"position": CLEAN, "position-min": CONTAMINATED, "key": BORROWED, "corrected": CORRECTED, "none": NONE}
NARROW = ["run_id", "replica", "position", "key", "duration_ns", "comm_overlap_ns", "comm_overlap_frac"]
STATS = ["position_clean_ns", "position_min_ns", "position_min_frac", "corrected_ns"]


def with_replicas(kernels: pl.DataFrame, replicas: pl.DataFrame) -> pl.DataFrame:
    """``kernels`` with the ``replica`` group of their rank (``replicas.groups``)."""
    return kernels.with_columns(kernels.select("run_id", "rank").join(replicas, on=["run_id", "rank"], how="left",
                                                                      maintain_order="left")["replica"])


def placed(kernels: pl.DataFrame, replicas: pl.DataFrame, canonical: dict) -> pl.DataFrame:
    """``kernels`` (compute, with ``_row``, ``key`` and steps) with their ``replica`` and ``position`` in their
    replicas' canonical step (``sequences``)."""
    return with_replicas(kernels, replicas).with_columns(positions(kernels, canonical, replicas))


@dataclass
class StatParts:
    """What a rank gives the run's position and key statistics: its unoverlapped kernels in steps (``clean``:
    their durations make the position medians), each position's shortest instance and least overlap
    (``mins``), the instances of the positions it never ran unoverlapped (``dirty``: the correction's points),
    and all its unoverlapped kernels by key (``keyed``: the key medians)."""

    clean: pl.DataFrame
    mins: pl.DataFrame
    dirty: pl.DataFrame
    keyed: pl.DataFrame


GROUPS = {"clean": POSITION, "mins": POSITION, "dirty": POSITION, "keyed": [*PART, "key"]}  # each part's groups


def stat_parts(narrow: pl.DataFrame) -> StatParts:
    """A rank's (or a run's) :class:`StatParts`, from its :data:`NARROW` rows."""
    narrow = narrow.with_columns(pl.col("run_id").cast(pl.Categorical))  # one run id repeated: a dictionary
    clean = narrow.filter(pl.col("comm_overlap_ns") == 0).select(*PART, "position", "key", "duration_ns")
    stepped = narrow.filter(pl.col("position").is_not_null())
    mins = stepped.group_by(POSITION, maintain_order=True).agg(
        pl.col("duration_ns").min().alias("_min"), pl.col("comm_overlap_frac").min().alias("_frac"))
    placed_clean = clean.filter(pl.col("position").is_not_null()).select(*POSITION, "duration_ns")
    dirty = stepped.join(placed_clean.select(POSITION).unique(), on=POSITION, how="anti", maintain_order="left") \
        .select(*POSITION, "duration_ns", "comm_overlap_ns", "comm_overlap_frac")
    return StatParts(placed_clean, mins, dirty, clean.select(*PART, "key", "duration_ns"))


def _hashes(column: pl.Series) -> np.ndarray:
    """Each value's hash, the same in every process: a text's of its text (each distinct text hashed once)."""
    if not (column.dtype == pl.String or column.dtype == pl.Categorical or isinstance(column.dtype, pl.Enum)):
        return column.hash(seed=0).to_numpy()
    column = column.cast(pl.Categorical)
    distinct = column.unique().drop_nulls()
    codes = column.to_physical()
    table = np.zeros(int(cast("int | None", codes.max()) or 0) + 2, np.uint64)  # the last slot: null
    table[distinct.to_physical().to_numpy()] = distinct.cast(pl.String).hash(seed=0).to_numpy()
    return table[codes.fill_null(len(table) - 1).to_numpy()]


def in_buckets(parts: StatParts, count: int) -> tuple[StatParts, dict[str, list[int]]]:
    """``parts`` with the rows of each frame sorted by the bucket (of ``count``) its group hashes to, a group's
    rows in their order, and where each bucket starts in each frame (``count + 1`` offsets): the statistics
    of the groups of one bucket need its rows alone, from every rank (:func:`estimate_stats`)."""
    out, offsets = {}, {}
    for name, by in GROUPS.items():
        frame = getattr(parts, name)
        mixed = np.zeros(frame.height, np.uint64)
        for column in by:
            mixed = mixed * np.uint64(1_000_003) + _hashes(frame[column])  # wraps around: any mix will do
        bucket = mixed % np.uint64(count)
        order = np.argsort(bucket, kind="stable")
        out[name] = frame[order]
        offsets[name] = np.searchsorted(bucket[order], np.arange(count + 1)).tolist()
    return StatParts(**out), offsets


def estimate_stats(parts: list[StatParts]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Each position's statistics (``run_id, replica, position`` and :data:`STATS`) and each key's (``run_id,
    replica, key, key_clean_ns``), from the :func:`stat_parts` of a run's ranks in the run's order (or of the
    whole run at once, or of the ranks' rows of some groups alone: the same figures for those groups)."""
    def joined(name: str) -> pl.DataFrame:
        return pl.concat([getattr(p, name) for p in parts], how="vertical_relaxed")

    medians = group_medians(joined("clean"), POSITION, "duration_ns", "position_clean_ns")
    stats = joined("mins").group_by(POSITION, maintain_order=True).agg(
        pl.col("_min").min().cast(pl.Float64).alias("position_min_ns"),
        pl.col("_frac").min().alias("position_min_frac"),
    ).join(medians, on=POSITION, how="left", maintain_order="left")
    dirty = stats.filter(pl.col("position_clean_ns").is_null()).select(POSITION)  # every instance overlapped
    rows = joined("dirty").join(dirty, on=POSITION, how="semi", maintain_order="left").with_columns(
        pl.lit(None, pl.Float64).alias("position_clean_ns"))
    stats = stats.join(corrected_positions(rows), on=POSITION, how="left", maintain_order="left")
    keys = group_medians(joined("keyed"), [*PART, "key"], "duration_ns", "key_clean_ns")
    as_text = pl.col("run_id").cast(pl.String)
    return (stats.with_columns(as_text).select(*POSITION, *STATS),
            keys.with_columns(as_text))


def with_estimates(kernels: pl.DataFrame, stats: pl.DataFrame, keys: pl.DataFrame) -> pl.DataFrame:
    """``kernels`` (:func:`placed`) plus the statistics of their position and key (:func:`estimate_stats`),
    ``estimate_ns``, ``estimate_source`` and ``reference_kind``."""
    joined = kernels.select(*PART, "position", "key").join(stats, on=POSITION, how="left", maintain_order="left") \
        .join(keys, on=[*PART, "key"], how="left", maintain_order="left", nulls_equal=True)
    out = kernels.with_columns(joined.select(*STATS, "key_clean_ns"))
    choices = [("position", pl.col("position_clean_ns")),
               ("position-min", pl.when(pl.col("position_min_frac") < NEARLY_CLEAN).then(pl.col("position_min_ns"))),
               ("key", pl.col("key_clean_ns")),
               ("corrected", pl.col("corrected_ns")),
               ("position-min", pl.col("position_min_ns"))]
    source = pl.lit("none")
    for name, value in reversed(choices):
        source = pl.when(value.is_not_null()).then(pl.lit(name)).otherwise(source)
    return out.with_columns(pl.coalesce(*(v for _, v in choices)).alias("estimate_ns"),
                            source.alias("estimate_source")).with_columns(
        pl.col("estimate_source").replace_strict(KINDS, return_dtype=pl.String).alias("reference_kind"))


def within_trace_estimates(kernels: pl.DataFrame) -> pl.DataFrame:
    """``kernels`` (compute, with ``_row``, ``key``, steps and ``comm_overlap_ns``/``_frac``) plus the
    estimates above, ``estimate_ns``, ``estimate_source`` and ``reference_kind``: the whole run at once."""
    replicas = replica_groups(kernels)
    slim = kernels.select("_row", "run_id", "rank", "step", "step_kind", "key", "launch_ns", "start_ns")
    canonical = canonical_steps(step_sequences(slim), replicas)
    out = placed(kernels, replicas, canonical)
    return with_estimates(out, *estimate_stats([stat_parts(out.select(NARROW))]))
