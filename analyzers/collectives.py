"""Collectives as a performance engineer reads them: each instance's size, algorithm and bus bandwidth, and
who arrived last.

An *instance* is one collective across the ranks of the run: the k-th collective of a name (``AllReduce/RING/
LL``) in step i on every rank, matched as ``analyzers.stragglers.arrivals`` matches them (NCCL requires every
rank to issue a communicator's collectives in the same order); ``instance`` is k, counted from 0. A rank
*arrives* when its kernel starts; the instance's *transfer* begins when the last rank arrives, so the
transfer time is the last rank's kernel's duration (it waited for nobody), and the *arrival skew* is the last
arrival less the first.

Bandwidth is nccl-tests' (its PERFORMANCE.md): *algorithm bandwidth* = size / time, with size the whole
buffer (an all-gather's output, a reduce-scatter's input), and *bus bandwidth* = algorithm bandwidth × a
factor of the collective and its n ranks that makes it comparable to the hardware's peak: all-reduce 2(n−1)/n,
all-gather, reduce-scatter and all-to-all (n−1)/n, broadcast, reduce and send/receive 1. Measured from the
last arrival it is the transfer's (``busbw_gbps``); from each rank's own start, what that rank saw
(``own_busbw_gbps``, lower by its wait). GB/s are 10^9 bytes a second (bytes per nanosecond).

Sizes come from what the trace carries (``size_from``): the collective's own record in a torch.profiler trace
(its kernel's arguments, or the ``record_param_comms`` / ``nccl:*`` call that launched it), else, for the
all-reduces of a DDP step, its gradient buckets (as `traceql collect` recorded them, or DDP's packing of the
model's gradients), in the order DDP reduces them, where the step has exactly as many all-reduces as buckets.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, cast

import polars as pl

from traceql.analyzers.buckets import allreduce_factor
from traceql.analyzers.links import Link
from traceql.analyzers.stragglers import arrivals, step_skew

SIZE = {"bytes": pl.Int64, "dtype": pl.String, "group_size": pl.Int32, "size_from": pl.String}
# a torch.profiler record of a collective: the kernel it describes (its correlation id) or the call that
# launched it (its CPU interval), and what it moved
BY_KERNEL = {"run_id": pl.String, "rank": pl.Int32, "correlation_id": pl.Int64, **SIZE}
BY_CALL = {"run_id": pl.String, "rank": pl.Int32, "start_ns": pl.Int64, "end_ns": pl.Int64, **SIZE}
FROM_BUCKETS = "DDP buckets"

INSTANCE = ["run_id", "step", "collective", "instance"]
COLLECTIVES = {  # the `collectives` relation: one row per rank of each instance
    "run_id": pl.String, "step": pl.Int32, "collective": pl.String, "instance": pl.UInt32, "op": pl.String,
    "algorithm": pl.String, "protocol": pl.String, "rank": pl.Int32, "arrival_ns": pl.Int64, "end_ns": pl.Int64,
    "duration_ns": pl.Int64, "wait_ns": pl.Int64, "last": pl.Boolean, "held_ns": pl.Int64, "bytes": pl.Int64,
    "dtype": pl.String, "ranks": pl.Int32, "present": pl.Int32, "size_from": pl.String,
    "first_arrival_ns": pl.Int64, "last_arrival_ns": pl.Int64,
    "last_rank": pl.Int32, "skew_ns": pl.Int64, "transfer_ns": pl.Int64, "algbw_gbps": pl.Float64,
    "busbw_gbps": pl.Float64, "own_busbw_gbps": pl.Float64, "link": pl.String, "link_peak_gbps": pl.Float64,
    "peak_share": pl.Float64,
}


def operations(kernels: pl.DataFrame) -> set[str]:
    """The operations of ``kernels``' communication kernels that name their collective (``AllReduce``,
    ``AllGather`` ...)."""
    comm = kernels.filter(pl.col("kind") == "comm")
    return {str(c).split("/")[0] for c in comm["collective"].drop_nulls().unique().to_list()}


def bus_factor(op: pl.Expr, n: pl.Expr) -> pl.Expr:
    """nccl-tests' bus bandwidth factor of collective ``op`` on ``n`` ranks (null for another operation)."""
    share = (n - 1) / n
    return (pl.when(op == "AllReduce").then(allreduce_factor(n))
            .when(op.is_in(["AllGather", "ReduceScatter", "AllToAll", "AlltoAll"])).then(share)
            .when(op.is_in(["Broadcast", "Reduce", "SendRecv", "Send", "Recv"])).then(1.0))


def sized(comm: pl.DataFrame, by_kernel: pl.DataFrame, by_call: pl.DataFrame,
          buckets: Mapping[str, Sequence[int]]) -> pl.DataFrame:
    """``comm`` (communication kernels of the model: ``run_id, rank, correlation_id, launch_ns, step,
    step_kind, collective`` …) with :data:`SIZE`'s columns: from the kernel's own record, else the innermost
    call that holds its launch, else the run's DDP buckets (``buckets``: bytes per run, in reduce order)."""
    out = comm.join(by_kernel.cast(cast("Mapping[Any, type[pl.DataType]]", BY_KERNEL))
                    .unique(["run_id", "rank", "correlation_id"], keep="first"),
                    on=["run_id", "rank", "correlation_id"], how="left", maintain_order="left")
    calls = by_call.cast(cast("Mapping[Any, type[pl.DataType]]", BY_CALL)).sort("start_ns")
    if not calls.is_empty():
        order = pl.int_range(pl.len()).alias("_row")
        keyed = out.with_columns(order).filter(pl.col("launch_ns").is_not_null()).sort("launch_ns")
        held = (keyed.join_asof(calls.rename({c: f"_{c}" for c in [*SIZE, "start_ns", "end_ns"]}),
                                left_on="launch_ns", right_on="_start_ns", by=["run_id", "rank"],
                                strategy="backward", check_sortedness=False)
                .filter(pl.col("launch_ns") <= pl.col("_end_ns"))
                .select("_row", *(f"_{c}" for c in SIZE)))
        out = (out.with_columns(order).join(held, on="_row", how="left", maintain_order="left")
               .with_columns(*(pl.when(pl.col("bytes").is_null()).then(pl.col(f"_{c}")).otherwise(pl.col(c))
                               .alias(c) for c in SIZE))
               .drop("_row", *(f"_{c}" for c in SIZE)))
    return _from_buckets(out, buckets)


def _from_buckets(comm: pl.DataFrame, buckets: Mapping[str, Sequence[int]]) -> pl.DataFrame:
    """The all-reduces of each normal step of a run with buckets, where they are as many as its buckets and
    none has a size yet, sized by the buckets in launch order."""
    table = pl.DataFrame({"run_id": list(buckets), "_sizes": [list(map(int, b)) for b in buckets.values()]},
                         schema={"run_id": pl.String, "_sizes": pl.List(pl.Int64)})
    each = ["run_id", "rank", "step", "_ar"]
    allreduce = ((pl.col("step_kind") == "sync") & pl.col("collective").str.starts_with("AllReduce")
                 & pl.col("bytes").is_null())
    out = comm.join(table, on="run_id", how="left", maintain_order="left").with_columns(allreduce.alias("_ar"))
    out = out.with_columns(
        pl.int_range(pl.len()).over(*each, order_by=pl.col("launch_ns").fill_null(pl.col("start_ns"))).alias("_pos"),
        pl.len().over(*each).alias("_n"))
    fits = pl.col("_ar") & (pl.col("_n") == pl.col("_sizes").list.len())
    return out.with_columns(
        pl.when(fits).then(pl.col("_sizes").list.get(pl.col("_pos"), null_on_oob=True))
        .otherwise(pl.col("bytes")).alias("bytes"),
        pl.when(fits).then(pl.lit(FROM_BUCKETS)).otherwise(pl.col("size_from")).alias("size_from"),
    ).drop("_sizes", "_ar", "_pos", "_n")


def collectives(comm: pl.DataFrame, ranks: pl.DataFrame, links: Mapping[str, Link | None],
                partial: Collection[str] = (), unaligned: Collection[str] = ()) -> pl.DataFrame:
    """The ``collectives`` relation (:data:`COLLECTIVES`): one row per rank of each instance, from :func:`sized`
    communication kernels; ``links``: the link of each run's GPUs (None: unknown); ``partial``: the runs that
    are part of a larger job (``analyzers.partial``), whose communicators' size only a recorded group size
    tells; ``unaligned``: the runs whose ranks' clocks disagree (``analyzers.stragglers.disagreeing``). In
    either, who arrived last is not known, and the transfer is timed by the shortest kernel."""
    arrived = arrivals(comm, ranks, keep=list(SIZE), whole=True)
    if arrived.is_empty():
        return pl.DataFrame(schema=COLLECTIVES)
    parts = pl.col("collective").str.split("/")
    group = ["run_id", "step", "collective", "index"]
    world = ranks.group_by("run_id").agg(pl.col("rank").n_unique().cast(pl.Int32).alias("_world"))
    whole_run = ~pl.col("run_id").is_in(list(partial))
    n = pl.coalesce(pl.col("group_size").max().over(group), pl.when(whole_run).then(pl.col("_world")))
    aligned = ~pl.col("run_id").is_in(list(unaligned))
    complete = (pl.col("_present") >= pl.col("ranks")) & (pl.col("ranks") > 1) & whole_run & aligned
    link_rows = pl.DataFrame({"run_id": list(links), "link": [lk.name if lk else None for lk in links.values()],
                              "link_peak_gbps": [lk.peak_gbps if lk else None for lk in links.values()]},
                             schema={"run_id": pl.String, "link": pl.String, "link_peak_gbps": pl.Float64})
    last = pl.col("last")
    out = (arrived.join(world, on="run_id", how="left").with_columns(
        parts.list.get(0, null_on_oob=True).alias("op"), parts.list.get(1, null_on_oob=True).alias("algorithm"),
        parts.list.get(2, null_on_oob=True).alias("protocol"),
        (pl.col("arrival_ns") + pl.col("duration_ns")).alias("end_ns"),
        pl.col("bytes").max().over(group).alias("bytes"), pl.col("dtype").drop_nulls().first().over(group),
        pl.col("size_from").drop_nulls().first().over(group), n.alias("ranks"),
        pl.len().over(group).alias("_present"),
        pl.col("arrival_ns").min().over(group).alias("first_arrival_ns"),
        pl.col("arrival_ns").max().over(group).alias("last_arrival_ns"),
        pl.col("rank").filter(last).first().over(group).alias("last_rank"),
        pl.col("duration_ns").filter(last).first().over(group).alias("_last_ns"),
        pl.col("duration_ns").min().over(group).alias("_least_ns"))
        # an instance some rank lacks: who came last is unknown, and the transfer lasted at most its shortest
        .with_columns(*(pl.when(complete).then(pl.col(c)) for c in ("last_rank", "last_arrival_ns")),
                      pl.when(complete).then(pl.col("wait_ns")).alias("wait_ns"),
                      pl.when(complete).then(pl.col("_last_ns")).otherwise(pl.col("_least_ns")).alias("transfer_ns"))
        .with_columns((pl.col("last_arrival_ns") - pl.col("first_arrival_ns")).alias("skew_ns"),
                      (pl.col("bytes") / pl.col("transfer_ns")).alias("algbw_gbps"),
                      bus_factor(pl.col("op"), pl.col("ranks")).alias("_factor"))
        .with_columns((pl.col("algbw_gbps") * pl.col("_factor")).alias("busbw_gbps"),
                      (pl.col("bytes") / pl.col("duration_ns") * pl.col("_factor")).alias("own_busbw_gbps"))
        .join(link_rows, on="run_id", how="left")
        .with_columns((pl.col("busbw_gbps") / pl.col("link_peak_gbps")).alias("peak_share"))
        .rename({"index": "instance", "_present": "present"}))
    return out.select(*COLLECTIVES).cast(cast("Mapping[Any, type[pl.DataType]]", COLLECTIVES)).sort(*INSTANCE, "rank")


def instances(rows: pl.DataFrame) -> pl.DataFrame:
    """One row per instance of the ``collectives`` relation: its columns that are the instance's."""
    own = {"rank", "arrival_ns", "end_ns", "duration_ns", "wait_ns", "last", "held_ns", "own_busbw_gbps"}
    return rows.filter(pl.col("last")).select(c for c in COLLECTIVES if c not in own)


def positions(inst: pl.DataFrame) -> pl.DataFrame:
    """Each instance of a step (``collective``, ``instance``) across the steps of its run: how many steps, its
    bytes, and the medians of its transfer time, bus bandwidth, share of the link's peak and arrival skew, and
    the rank that arrived last most often (``last_rank``, at ``last_count`` of the ``steps``)."""
    key = ["run_id", "collective", "instance"]
    mode = inst.group_by(*key, "last_rank").len().sort(*key, "len", "last_rank", descending=[False] * 3 + [True, False])
    mode = mode.unique(key, keep="first", maintain_order=True).rename({"len": "last_count"})
    return (inst.group_by(key)
            .agg(pl.col("op").first(), pl.len().alias("steps"), pl.col("bytes").max(), pl.col("dtype").first(),
                 pl.col("size_from").drop_nulls().first(), pl.col("ranks").max(),
                 pl.col("transfer_ns").median().alias("transfer_ns"), pl.col("busbw_gbps").median(),
                 pl.col("peak_share").median(), pl.col("skew_ns").median(), pl.col("link").first(),
                 pl.col("link_peak_gbps").first())
            .join(mode, on=key, how="left")
            .sort(*key))


def step_last(rows: pl.DataFrame) -> pl.DataFrame:
    """Per (run_id, step) of the ``collectives`` relation: its instances, their summed arrival skew, and the rank
    that held the others longest at them (``last_rank``, ``held_ns``: as the ``ranks`` command weighs a
    straggler, ``analyzers.stragglers.step_skew``)."""
    rows = rows.filter(pl.col("present") >= pl.col("ranks"), pl.col("step").is_not_null())
    inst = instances(rows).group_by("run_id", "step").agg(pl.len().alias("instances"), pl.col("skew_ns").sum())
    held = (step_skew(rows).sort("run_id", "step", "held_ns", "rank", descending=[False, False, True, False])
            .unique(["run_id", "step"], keep="first", maintain_order=True)
            .select("run_id", "step", pl.col("rank").alias("last_rank"), "held_ns"))
    return inst.join(held, on=["run_id", "step"]).sort("run_id", "step")


def totals(rows: pl.DataFrame, gpu_ns: Mapping[str, int]) -> pl.DataFrame:
    """Per run and collective (its operation, algorithm and protocol), over every rank's kernel of each of its
    instances, in steps or not: how many kernels, their total time and its share of the run's GPU time
    (``gpu_ns``: per run, every kernel's time summed over its ranks; null where not given), and a kernel's
    mean, minimum, maximum and standard deviation (of the population): `nsys recipe nccl_sum`'s figures,
    per collective, largest total first."""
    runs = pl.DataFrame({"run_id": list(gpu_ns), "gpu_ns": list(gpu_ns.values())},
                        schema={"run_id": pl.String, "gpu_ns": pl.Int64})
    d = pl.col("duration_ns")
    return (rows.group_by("run_id", "collective", "op")
            .agg(pl.len().alias("kernels"), d.sum().alias("total_ns"), d.mean().alias("mean_ns"),
                 d.min().alias("min_ns"), d.max().alias("max_ns"), d.std(ddof=0).alias("std_ns"))
            .join(runs, on="run_id", how="left")
            .with_columns((pl.col("total_ns") / pl.col("gpu_ns")).alias("gpu_share")).drop("gpu_ns")
            .sort(["run_id", "total_ns", "collective"], descending=[False, True, False]))
