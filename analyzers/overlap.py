"""Per-kernel communication overlap: how long each compute kernel ran alongside NCCL, and next to what."""

from __future__ import annotations

import numpy as np
import polars as pl

from traceql.analyzers.intervals import merge, overlap_with_union, overlapping_pairs

GROUP = ["run_id", "rank", "device"]


def _device_overlap(compute: pl.DataFrame, comm: pl.DataFrame) -> pl.DataFrame:
    """``_idx, comm_overlap_ns, concurrent_comm`` for the compute kernels of one device.

    ``concurrent_comm`` is the collective of the comm kernel that overlaps the kernel longest (the earliest
    such on a tie); ``comm`` when the kernel name carries none; null when nothing overlaps.
    """
    comm = comm.sort("start_ns", "end_ns", maintain_order=True)
    cs, ce = compute["start_ns"].to_numpy(), compute["end_ns"].to_numpy()
    ms, me = comm["start_ns"].to_numpy(), comm["end_ns"].to_numpy()
    us, ue = merge(ms, me)
    i, j, length = overlapping_pairs(cs, ce, ms, me)
    best = np.full(len(cs), -1, np.int64)
    if len(i):
        order = np.lexsort((j, -length, i))  # per kernel: longest first, then the earliest comm kernel
        first = np.ones(len(order), bool)
        first[1:] = i[order][1:] != i[order][:-1]
        best[i[order][first]] = j[order][first]
    names = comm["collective"].fill_null("").replace("", "comm")
    label = names.gather(pl.Series(best).replace(-1, None))  # null where nothing overlaps
    return pl.DataFrame({
        "_idx": compute["_idx"],
        "comm_overlap_ns": pl.Series(overlap_with_union(us, ue, cs, ce), dtype=pl.Int64),
        "concurrent_comm": label.cast(pl.String),
    })


def comm_overlap(kernels: pl.DataFrame, context: pl.DataFrame | None = None) -> pl.DataFrame:
    """Compute kernels with ``comm_overlap_ns``, ``comm_overlap_frac`` and ``concurrent_comm``.

    ``comm_overlap_ns`` is the length of the kernel's intersection with the union of the communication
    kernels on the same (run, rank, device): exact, O(n log n) per device. The wide frame is filtered once
    and never joined: per-device results land in place through the compute kernels' row numbers.
    ``context``: communication kernels beside those of ``kernels`` (of a part of a rank read alone: those of
    its other parts that ran while its kernels did), with ``run_id, rank, device, start_ns, end_ns,
    collective``.
    """
    compute = kernels.filter(pl.col("kind") == "compute")
    place = [*GROUP, "start_ns", "end_ns"]
    slim = compute.select(place).with_row_index("_idx")
    comm = kernels.filter(pl.col("kind") == "comm").select(*place, "collective")
    if context is not None and context.height:
        comm = pl.concat([comm, context.select(comm.columns).cast(comm.schema)])
    comm_by_device = {key: grp for key, grp in comm.group_by(GROUP, maintain_order=True)}
    none = comm.clear()
    parts = [_device_overlap(grp, comm_by_device.get(key, none))
             for key, grp in slim.group_by(GROUP, maintain_order=True)]
    schema = {"_idx": pl.UInt32, "comm_overlap_ns": pl.Int64, "concurrent_comm": pl.String}
    # every compute kernel is in one device's part: sorted by row number, the parts line up with ``compute``
    overlap = pl.concat(parts).sort("_idx") if parts else pl.DataFrame(schema=schema)
    dur = pl.col("duration_ns")
    return compute.with_columns(overlap["comm_overlap_ns"], overlap["concurrent_comm"]).with_columns(
        pl.when(dur > 0).then(pl.col("comm_overlap_ns") / dur).otherwise(0.0).alias("comm_overlap_frac"))
