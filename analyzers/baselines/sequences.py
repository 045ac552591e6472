"""A trace's own canonical steps: where each kernel stands in its step, with no isolated reference.

Per step, the compute kernels in launch order form a sequence of keys. The *canonical step* of a group of
replica ranks is the sequence its steps run most often (ties: the one seen first, ranks in order, each rank's
steps in order); a kernel's *position* is the index of the canonical kernel it aligns with
(``twins.align``: longest matching blocks), null outside the steps or where it aligns with nothing.

Done in parts, so that ranks read one at a time give what the whole run read at once gives:
:func:`sequence_places` per rank (its distinct sequences, counted, and each kernel's sequence and place in
it), :func:`canonical_steps` over every rank of a run, :func:`alignments` of each distinct sequence with its
canonical step, then :func:`gathered` positions per rank.
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
PLACES = {"_seq": pl.Int32, "_at": pl.Int32}  # a kernel's sequence (an index into its rank's) and place in it


def sequence_places(kernels: pl.DataFrame) -> tuple[Sequences, pl.DataFrame]:
    """Each rank's distinct step sequences (``run_id, rank, keys, count``, in the order first seen), and for each
    row of ``kernels`` its sequence's index in that list (``_seq``) and its place in its step (``_at``), null
    outside the steps. ``kernels``: compute kernels with ``run_id, rank, step, step_kind, key, launch_ns,
    start_ns``."""
    framed = kernels.select(*ORDER, "key").with_row_index("_i")
    ordered = framed.filter(pl.col("step").is_not_null()).sort(ORDER, maintain_order=True)
    steps = ordered.group_by(STEP, maintain_order=True).agg(
        pl.len().alias("len"), pl.col("key").to_physical().alias("_ids")).with_columns(
        pl.col("_ids").hash().alias("_h"), (pl.col("len").cum_sum() - pl.col("len")).alias("offset"))
    distinct = steps.group_by("run_id", "rank", "_h", maintain_order=True).agg(
        pl.len().alias("count"), pl.col("offset").first(), pl.col("len").first()).with_row_index("_seq")
    keys = ordered["key"]
    sequences = [(run_id, rank, tuple(keys.slice(offset, n).to_list()), count)
                 for run_id, rank, count, offset, n in distinct.select("run_id", "rank", "count", "offset", "len")
                 .iter_rows()]
    per_step = steps.join(distinct.select("run_id", "rank", "_h", "_seq"), on=["run_id", "rank", "_h"], how="left",
                          maintain_order="left")
    seq = np.repeat(per_step["_seq"].to_numpy(), per_step["len"].to_numpy())
    at = np.arange(ordered.height) - np.repeat(per_step["offset"].to_numpy(), per_step["len"].to_numpy())
    rows = ordered["_i"].to_numpy()
    empty = pl.repeat(None, kernels.height, dtype=pl.Int32, eager=True)
    places = pl.DataFrame([empty.alias("_seq").scatter(rows, seq.astype(np.int32)),
                           empty.alias("_at").scatter(rows, at.astype(np.int32))])
    return sequences, places


def step_sequences(kernels: pl.DataFrame) -> Sequences:
    """Each rank's distinct step sequences (``run_id, rank, keys, count``), in the order first seen."""
    return sequence_places(kernels)[0]


def canonical_steps(sequences: Sequences, replicas: pl.DataFrame) -> Canonical:
    """The canonical step of each group of replicas (``replicas``: ``run_id, rank, replica``), from every rank's
    :func:`step_sequences`: its most common sequence, the first seen on a tie (ranks in order)."""
    group = {(run_id, rank): replica for run_id, rank, replica in replicas.select("run_id", "rank", "replica")
             .iter_rows()}
    counts: dict[tuple[str, int], Counter[tuple[object, ...]]] = {}
    for run_id, rank, seq, n in sorted(sequences, key=lambda s: (s[0], group[(s[0], s[1])], s[1])):
        counts.setdefault((run_id, group[(run_id, rank)]), Counter())[seq] += n
    return {part: seqs.most_common(1)[0][0] for part, seqs in counts.items()}


def alignments(sequences: Sequences, replicas: pl.DataFrame, canonical: Canonical) -> list[np.ndarray | None]:
    """Each of a rank's distinct sequences aligned with its replicas' canonical step: for each of its kernels,
    the canonical position it aligns with (-1: none); None where the group has no canonical step."""
    group = {(run_id, rank): replica for run_id, rank, replica in replicas.select("run_id", "rank", "replica")
             .iter_rows()}
    out: list[np.ndarray | None] = []
    ids: dict[tuple[str, int], tuple[dict[object, int], tuple[int, ...]]] = {}
    for run_id, rank, seq, _ in sequences:
        part = (run_id, group.get((run_id, rank)))
        if part not in canonical:
            out.append(None)
            continue
        if part not in ids:  # the canonical keys as integers: aligning integers is the fast path
            names = {k: i for i, k in enumerate(dict.fromkeys(canonical[part]))}
            ids[part] = (names, tuple(names[k] for k in canonical[part]))
        names, target = ids[part]
        out.append(align(tuple(names.get(k, -1) for k in seq), target))  # a key the canonical lacks matches none
    return out


def gathered(places: pl.DataFrame, aligned: list[np.ndarray | None]) -> pl.Series:
    """``position`` for rows with their ``_seq`` and ``_at`` (:func:`sequence_places`) from the alignment of each
    sequence (:func:`alignments`); null outside the steps or where a kernel aligns with nothing."""
    sizes = [0 if a is None else len(a) for a in aligned]
    flat = np.concatenate([a for a in aligned if a is not None] or [np.empty(0, np.int64)])
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64) if sizes else np.empty(0, np.int64)
    has = np.array([a is not None for a in aligned], bool)
    seq, at = places["_seq"].to_numpy(), places["_at"].to_numpy()
    stepped = ~places["_seq"].is_null().to_numpy()
    out = np.full(places.height, -1, np.int64)
    idx = np.where(stepped, seq, 0).astype(np.int64)
    usable = stepped & (has[idx] if len(has) else False)
    out[usable] = flat[starts[idx[usable]] + at[usable].astype(np.int64)]
    return pl.Series("position", out).replace(-1, None)


def positions(kernels: pl.DataFrame, canonical: Canonical, replicas: pl.DataFrame) -> pl.Series:
    """``position`` for each row of ``kernels`` in its replicas' canonical step (the parts above, for frames
    read whole)."""
    sequences, places = sequence_places(kernels)
    return gathered(places, alignments(sequences, replicas, canonical))
