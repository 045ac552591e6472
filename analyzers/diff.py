"""Two runs of the same model compared: step time, the per-rank breakdown, and each compute kernel of the
later run (AFTER) paired with its counterpart in the earlier one (BEFORE) by step alignment.

Pairing is the twin alignment of ``traceql.analyzers.baselines.twins`` with BEFORE as the reference, rank by rank
(ranks matched by number): BEFORE's normal steps give one canonical step per rank and each position's median
duration; every normal step of AFTER is aligned with it by key (demangled name + grid + block) in launch
order, longest matching blocks first. A kernel of AFTER aligned with a position is *paired*; one aligned with
nothing is *new*; a canonical position that a step of AFTER has nothing aligned with is *removed* from that
step. Times are typical ones on both sides: a kernel's before time is its BEFORE position's median over
BEFORE's steps, its after time its own position's median over AFTER's steps (AFTER aligned with itself the
same way), so that a run compared with itself changes by exactly nothing and a few slowed instances do not
move a kernel's total; ``after_actual_ns`` keeps the durations as measured.
"""

from __future__ import annotations

from typing import cast

import polars as pl

from traceql.analyzers.baselines.twins import canonical_steps, twin_baselines

BY = ["rank"]  # ranks are matched by number
KERNEL = ["rank", "step", "step_kind", "key", "launch_ns", "start_ns", "duration_ns", "signature", "short_name",
          "name"]
RANK_COLUMNS = ["comm_comp_overlap_pct", "compute_ns", "comm_ns", "memory_ns", "idle_ns", "cases", "time_lost_ns"]
NAMES = ["signature", "short_name", "name"]


def run_step_times(steps: pl.DataFrame) -> pl.DataFrame:
    """``step, step_ns`` per normal step of one run (``steps``: the model's relation): the longest of its ranks'
    GPU time over it (each rank's first GPU start to last GPU end of what the step launched). A late rank's
    peers wait for it in their collectives, so their spans carry its delay; a span across the ranks would not
    do: the first kernels of one step start up to 91 ms apart on the ranks of the 4-GPU GPT-2 run (each rank's
    queue still busy with its previous step), which would make an 82 ms step 174 ms. The run's first captured
    step is left out where others remain, as the what-if leaves it out: its queues start empty and its first
    kernels pay their warm-up (176 ms on that run's rank 3, against 82 ms)."""
    normal = steps.filter((pl.col("step_kind") == "sync") & pl.col("gpu_start_ns").is_not_null())
    span = (pl.col("gpu_end_ns") - pl.col("gpu_start_ns")).max()
    times = normal.group_by("step").agg(span.cast(pl.Int64).alias("step_ns")).sort("step")
    later = times.filter(pl.col("step") != steps["step"].min())
    return later if later.height else times


def step_figures(times: pl.DataFrame) -> dict[str, float | int | None]:
    """The mean and 90th percentile (linear) of :func:`run_step_times`, how many steps they are over, and the
    slowest step (its number and time): what a user looks at first when the tail moved."""
    values = times["step_ns"].cast(pl.Float64)
    if values.is_empty():
        return {"mean_ns": None, "p90_ns": None, "steps": 0, "slowest_step": None, "slowest_ns": None}
    slowest = times.sort("step_ns", "step", descending=[True, False]).row(0, named=True)
    return {"mean_ns": float(values.mean()), "p90_ns": float(values.quantile(0.9, "linear")),
            "steps": values.len(), "slowest_step": slowest["step"], "slowest_ns": float(slowest["step_ns"])}


def span_time(ranks: pl.DataFrame) -> float | None:
    """The median of the ranks' capture spans: a run's time where it has no steps. None when it has no ranks."""
    value = cast("float | None", ranks["span_ns"].drop_nulls().median())
    return None if value is None else float(value)


def change_pct(before: float | None, after: float | None) -> float | None:
    """``after`` against ``before`` in percent (positive: larger, i.e. slower for a time)."""
    if before is None or after is None or before == 0:
        return None
    return 100.0 * (after - before) / before


def verdict(change: float | None, tolerance: float, tail: float | None = None) -> str:
    """``regressed`` (the mean step time, or its 90th percentile ``tail``, slower by more than ``tolerance``
    %), ``improved`` (the mean faster by more, the tail not slower by more), ``no change`` (within it),
    ``unknown`` (no step time to compare)."""
    if change is None:
        return "unknown"
    if max(change, tail if tail is not None else change) > tolerance:
        return "regressed"
    return "improved" if change < -tolerance else "no change"


def run_totals(ranks: pl.DataFrame) -> dict[str, float | int | None]:
    """A labelled run over its ranks: overlap % (time compute and communication ran together / time
    communication ran, both summed over ranks), slowdown cases, time lost, compute kernels."""
    comm = int(ranks["comm_ns"].sum())
    return {"overlap_pct": round(100.0 * int(ranks["comm_compute_overlap_ns"].sum()) / comm, 2) if comm else None,
            "cases": int(ranks["cases"].sum()), "time_lost_ns": int(ranks["time_lost_ns"].sum()),
            "compute_kernels": int(ranks["compute_kernels"].sum())}


def per_step(breakdown: pl.DataFrame, labelled: pl.DataFrame) -> pl.DataFrame:
    """Per rank, its mean over its normal steps (``breakdown``: ``analyzers.step_breakdown.step_breakdown``;
    ``labelled``: ``cases, time_lost_ns`` per step of a rank) of :data:`RANK_COLUMNS`: the overlap % is the
    communication time compute hid over all its steps, in percent of their communication time."""
    key = ["rank", "step"]
    rows = breakdown.join(labelled.select(*key, "cases", "time_lost_ns"), on=key, how="left").with_columns(
        pl.col("cases", "time_lost_ns").fill_null(0))
    hidden = (pl.col("comm_ns") - pl.col("exposed_comm_ns")).sum()
    return rows.group_by("rank").agg(
        pl.when(pl.col("comm_ns").sum() > 0).then((100 * hidden / pl.col("comm_ns").sum()).round(2))
        .alias("comm_comp_overlap_pct"),
        *(pl.col(c).mean() for c in RANK_COLUMNS[1:])).sort("rank")


def rank_changes(before: pl.DataFrame, after: pl.DataFrame) -> pl.DataFrame:
    """One row per rank number of either run (each side: :func:`per_step`): ``rank`` and ``<column>_before``,
    ``<column>_after`` for the overlap %, compute, communication, memory and idle time, cases and time lost per
    normal step (null: the rank is absent)."""
    def side(ranks: pl.DataFrame, suffix: str) -> pl.DataFrame:
        return ranks.select("rank", *(pl.col(c).alias(f"{c}_{suffix}") for c in RANK_COLUMNS))

    joined = side(before, "before").join(side(after, "after"), on="rank", how="full", coalesce=True)
    return joined.select("rank", *(f"{c}_{s}" for c in RANK_COLUMNS for s in ("before", "after"))).sort("rank")


def _normal_compute(kernels: pl.DataFrame) -> pl.DataFrame:
    return kernels.filter((pl.col("kind") == "compute") & (pl.col("step_kind") == "sync")).select(
        pl.lit("run").alias("run_id"), *KERNEL)  # one run a side: the run's name plays no part


def pair_kernels(before: pl.DataFrame, after: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The compute kernels of AFTER's normal steps, each with its counterpart in BEFORE, and BEFORE's
    canonical steps.

    Pairs: ``rank, step, pos`` (its index in its step, launch order), ``key``, ``signature, short_name, name``,
    ``duration_ns``, ``after_ns`` (its position's median over AFTER's steps; its duration where its step's
    sequence has no such position), and ``before_step, before_pos, before_key`` (the BEFORE kernel it aligns with: rank
    ``rank``, step ``before_step``, index ``before_pos`` in launch order; null when new), ``before_ns`` (that
    position's median duration over BEFORE's steps). Canonical: ``rank, step, twin_pos, key, baseline_ns``.
    """
    target, reference = _normal_compute(after), _normal_compute(before)
    target = target.sort("rank", "step", "launch_ns", "start_ns").with_row_index("_row").with_columns(
        pl.int_range(pl.len(), dtype=pl.Int64).over("rank", "step").alias("pos"))
    canonical = canonical_steps(reference, BY)
    twins = twin_baselines(target, reference, BY).select("_row", "twin_pos", pl.col("baseline_ns").alias("before_ns"))
    own = twin_baselines(target, target, BY).select("_row", pl.col("baseline_ns").alias("after_ns"))
    pairs = target.join(twins, on="_row", how="left", maintain_order="left").join(
        own, on="_row", how="left", maintain_order="left").join(
        canonical.select("rank", pl.col("step").alias("before_step"), "twin_pos", pl.col("key").alias("before_key")),
        on=["rank", "twin_pos"], how="left", maintain_order="left")
    after_ns = pl.coalesce("after_ns", pl.col("duration_ns").cast(pl.Float64)).alias("after_ns")
    return pairs.select("rank", "step", "pos", "key", *NAMES, "duration_ns", after_ns, "before_step",
                        pl.col("twin_pos").alias("before_pos"), "before_key", "before_ns"), canonical


def _by_key(frame: pl.DataFrame, *aggs: pl.Expr) -> pl.DataFrame:
    return frame.group_by("key").agg(pl.len().alias("instances"), *aggs, *(pl.col(c).first() for c in NAMES)) \
        .with_columns(pl.col("key").cast(pl.String))


def kernel_changes(pairs: pl.DataFrame) -> pl.DataFrame:
    """Per key of the paired kernels: ``instances, before_ns`` (Σ of their BEFORE medians), ``after_ns`` (Σ of
    their AFTER medians), ``delta_ns``, ``delta_pct``, ``after_actual_ns`` (Σ of their durations), by |delta|."""
    paired = _by_key(pairs.filter(pl.col("before_pos").is_not_null()), pl.col("before_ns").sum(),
                     pl.col("after_ns").sum(), pl.col("duration_ns").sum().cast(pl.Float64).alias("after_actual_ns"))
    return paired.with_columns((pl.col("after_ns") - pl.col("before_ns")).alias("delta_ns")).with_columns(
        pl.when(pl.col("before_ns") > 0).then(100 * pl.col("delta_ns") / pl.col("before_ns")).alias("delta_pct"),
    ).sort(pl.col("delta_ns").abs(), "key", descending=[True, False]).select(
        "key", *NAMES, "instances", "before_ns", "after_ns", "delta_ns", "delta_pct", "after_actual_ns")


def new_kernels(pairs: pl.DataFrame) -> pl.DataFrame:
    """Per key of AFTER's kernels that align with nothing in BEFORE: ``instances, after_ns`` (Σ of their
    AFTER medians), by time."""
    new = _by_key(pairs.filter(pl.col("before_pos").is_null()), pl.col("after_ns").sum())
    return new.sort("after_ns", "key", descending=[True, False]).select("key", *NAMES, "instances", "after_ns")


def removed_kernels(pairs: pl.DataFrame, canonical: pl.DataFrame, before: pl.DataFrame) -> pl.DataFrame:
    """Per key of BEFORE's canonical positions that a normal step of AFTER (same rank) has nothing aligned
    with, counted once per such step: ``instances, before_ns`` (Σ of the positions' medians), by time.
    ``before`` (BEFORE's kernels) names the keys."""
    steps = pairs.select("rank", "step").unique()
    hit = pairs.filter(pl.col("before_pos").is_not_null()).select("rank", "step",
                                                                   pl.col("before_pos").alias("twin_pos"))
    missing = steps.join(canonical.drop("step"), on="rank").join(hit, on=["rank", "step", "twin_pos"], how="anti")
    names = before.filter(pl.col("kind") == "compute").group_by("key").agg(pl.col(c).first() for c in NAMES)
    removed = _by_key(missing.join(names, on="key", how="left", nulls_equal=True), pl.col("baseline_ns").sum()
                      .alias("before_ns"))
    return removed.sort("before_ns", "key", descending=[True, False]).select("key", *NAMES, "instances", "before_ns")
