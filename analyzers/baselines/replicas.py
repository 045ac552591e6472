"""Which ranks of a run are replicas: ranks that run the same kernels in each step (data-parallel copies of
one model), as against shards, pipeline stages and experts, which run different work.

A rank's *step bag* is how many times each kernel key runs in one of its normal steps (its count over its
steps, divided by their number). Two ranks are replicas when their bags are alike: Σ min / Σ max over the
keys of both at least :data:`ALIKE`. DDP ranks score 1.0 on every run we have; the two ranks of HTA's sharded
embedding trace 0.70 (their step order cannot tell: on multi-stream traces two steps of the *same* rank align
at 0.6). Only replicas lend each other a reference.
"""

from __future__ import annotations

import polars as pl

ALIKE = 0.9  # step-bag similarity from which two ranks are replicas


def _similarity(a: dict[object, float], b: dict[object, float]) -> float:
    keys = a.keys() | b.keys()
    most = sum(max(a.get(k, 0.0), b.get(k, 0.0)) for k in keys)
    return sum(min(a.get(k, 0.0), b.get(k, 0.0)) for k in keys) / most if most else 1.0


def step_bags(kernels: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A rank's step bag in parts: ``run_id, rank, key, len`` (how many times each key runs in its normal steps)
    and ``run_id, rank, steps`` (how many normal steps). ``kernels``: compute kernels with ``run_id, rank,
    step, step_kind, key``. All :func:`groups` needs of a rank (or of a window of its steps: parts add up)."""
    normal = kernels.filter(pl.col("step").is_not_null() & (pl.col("step_kind") != "isolated"))
    steps = normal.group_by("run_id", "rank").agg(pl.col("step").n_unique().alias("steps"))
    return normal.group_by("run_id", "rank", "key").len(), steps


def groups(ranks: pl.DataFrame, counts: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """``run_id, rank, replica`` for ``ranks`` (``run_id, rank``) from the parts of their :func:`step_bags`: ranks
    of a run with alike bags share a ``replica`` number (the rank of the group's first member, ranks taken in
    order). Ranks without normal steps each form their own group."""
    ranks = ranks.unique().sort("run_id", "rank")
    steps = steps.group_by("run_id", "rank").agg(pl.col("steps").sum())
    bags = (counts.group_by("run_id", "rank", "key").agg(pl.col("len").sum())
            .join(steps, on=["run_id", "rank"]).with_columns((pl.col("len") / pl.col("steps")).alias("per")))
    bag: dict[tuple, dict[object, float]] = {}
    for run_id, rank, key, per in bags.select("run_id", "rank", "key", "per").iter_rows():
        bag.setdefault((run_id, rank), {})[key] = per
    replica = []
    heads: dict[object, list[tuple[int, dict[object, float]]]] = {}  # each run's groups: (first rank, its bag)
    for run_id, rank in ranks.iter_rows():
        mine = bag.get((run_id, rank))
        found_groups = heads.setdefault(run_id, [])
        found = next((head for head, head_bag in found_groups
                      if mine is not None and _similarity(mine, head_bag) >= ALIKE), None)
        if found is None:
            found = rank
            if mine is not None:
                found_groups.append((rank, mine))
        replica.append(found)
    return ranks.with_columns(pl.Series("replica", replica, dtype=pl.Int32))


def replica_groups(kernels: pl.DataFrame) -> pl.DataFrame:
    """``run_id, rank, replica``: ranks of a run with alike step bags share a ``replica`` number (the rank of
    the group's first member). Ranks without normal steps each form their own group. ``kernels``: compute
    kernels with ``run_id, rank, step, step_kind, key``."""
    return groups(kernels.select("run_id", "rank"), *step_bags(kernels))
