"""A trace's own canonical steps: where each kernel stands in its step, with no isolated reference.

Per step, the compute kernels in launch order form a sequence of keys. The *canonical step* of a group of
replica ranks is the sequence its steps run most often (ties: the one seen first, ranks in order, each rank's
steps in order); a kernel's *position* is the index of the canonical kernel it aligns with
(``twins.align``: longest matching blocks), null outside the steps or where it aligns with nothing.

Done in three parts, so that ranks read one at a time give what the whole run read at once gives:
:func:`step_sequences` per rank (its distinct sequences, counted), :func:`canonical_steps` over every rank of
a run, :func:`positions` per rank against them.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import polars as pl

from traceql.analyzers.baselines.twins import align

STEP = ["run_id", "rank", "step", "step_kind"]
ORDER = [*STEP, "launch_ns", "start_ns"]  # a step's kernels in launch order
Sequences = list[tuple[str, int, tuple[object, ...], int]]  # (run_id, rank, keys, steps that run them)
Canonical = dict[tuple[str, int], tuple[object, ...]]  # (run_id, replica) -> the canonical step's keys


def _ordered(kernels: pl.DataFrame) -> pl.DataFrame:
    """The kernels in steps, step by step in launch order (ties kept in the frame's order)."""
    return kernels.filter(pl.col("step").is_not_null()).sort(ORDER, maintain_order=True)


def _steps(ordered: pl.DataFrame) -> pl.DataFrame:
    """One row per step of ``ordered``: its ``run_id, rank``, ``offset`` and ``len`` (its slice)."""
    return ordered.group_by(STEP, maintain_order=True).len().with_columns(
        (pl.col("len").cum_sum() - pl.col("len")).alias("offset"))


def step_sequences(kernels: pl.DataFrame) -> Sequences:
    """Each rank's distinct step sequences (``run_id, rank, keys, count``), in the order first seen.
    ``kernels``: compute kernels with ``run_id, rank, step, step_kind, key, launch_ns, start_ns``."""
    ordered = _ordered(kernels.select(*ORDER, "key"))
    keys = ordered["key"].to_list()
    counts: dict[tuple[str, int], Counter[tuple[object, ...]]] = {}
    for run_id, rank, _step, _kind, n, offset in _steps(ordered).iter_rows():
        counts.setdefault((run_id, rank), Counter())[tuple(keys[offset:offset + n])] += 1
    return [(run_id, rank, seq, n) for (run_id, rank), seqs in counts.items() for seq, n in seqs.items()]


def canonical_steps(sequences: Sequences, replicas: pl.DataFrame) -> Canonical:
    """The canonical step of each group of replicas (``replicas``: ``run_id, rank, replica``), from every rank's
    :func:`step_sequences`: its most common sequence, the first seen on a tie (ranks in order)."""
    group = {(run_id, rank): replica for run_id, rank, replica in replicas.select("run_id", "rank", "replica")
             .iter_rows()}
    counts: dict[tuple[str, int], Counter[tuple[object, ...]]] = {}
    for run_id, rank, seq, n in sorted(sequences, key=lambda s: (s[0], group[(s[0], s[1])], s[1])):
        counts.setdefault((run_id, group[(run_id, rank)]), Counter())[seq] += n
    return {part: seqs.most_common(1)[0][0] for part, seqs in counts.items()}


def positions(kernels: pl.DataFrame, canonical: Canonical) -> pl.Series:
    """``position`` for each row of ``kernels`` (with ``_row``, ``replica`` and :data:`ORDER`'s columns): its
    index in its replicas' canonical step (null outside the steps, or where it aligns with nothing).
    Identical sequences are aligned once."""
    none = pl.repeat(None, kernels.height, dtype=pl.Int64, eager=True).alias("position")
    if kernels.is_empty() or kernels["step"].is_null().all():
        return none
    ordered = _ordered(kernels.select(*ORDER, "key", "replica", "_row"))
    keys, rows = ordered["key"].to_list(), ordered["_row"].to_numpy()
    replica = ordered["replica"].to_numpy()
    out = np.full(len(keys), -1, np.int64)
    ids: dict[tuple[str, int], tuple[dict[object, int], tuple[int, ...]]] = {}
    cache: dict[tuple[tuple[str, int], tuple[int, ...]], np.ndarray] = {}
    for run_id, _rank, _step, _kind, n, offset in _steps(ordered).iter_rows():
        part = (run_id, int(replica[offset]))
        if part not in canonical:
            continue
        if part not in ids:  # the canonical keys as integers: aligning integers is the fast path
            names = {k: i for i, k in enumerate(dict.fromkeys(canonical[part]))}
            ids[part] = (names, tuple(names[k] for k in canonical[part]))
        names, target = ids[part]
        seq = tuple(names.get(k, -1) for k in keys[offset:offset + n])  # a key the canonical lacks matches none
        if (part, seq) not in cache:
            cache[(part, seq)] = align(seq, target)
        out[offset:offset + n] = cache[(part, seq)]
    order = kernels["_row"].arg_sort().to_numpy()  # row ids are unique: each ordered row is found by search
    at = order[np.searchsorted(kernels["_row"].to_numpy()[order], rows)]
    found = pl.Series("position", out).replace(-1, None)
    return none.scatter(at, found)
