"""Per-kernel communication overlap: how long each compute kernel ran alongside NCCL, and next to what."""

from __future__ import annotations

import duckdb
import polars as pl

from analyzers.intervals import merge, overlap_with_union

GROUP = ["run_id", "rank", "device"]


def _signature() -> pl.Expr:
    return pl.format(
        "{} g{}x{}x{} b{}x{}x{}",
        "short_name", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
    ).alias("signature")


def with_signature(kernels: pl.DataFrame) -> pl.DataFrame:
    """Add ``signature`` (short name + grid + block): the unit whose durations are comparable."""
    return kernels.with_columns(_signature())


def _concurrent_comm(compute: pl.DataFrame, comm: pl.DataFrame) -> pl.DataFrame:
    """For each compute kernel (by ``_idx``), the collective of the comm kernel it overlaps most."""
    con = duckdb.connect()
    con.register("compute_k", compute.select([*GROUP, "_idx", "start_ns", "end_ns"]).to_arrow())
    con.register("comm_k", comm.select([*GROUP, "start_ns", "end_ns", "collective"]).to_arrow())
    out = con.sql("""
        SELECT c._idx, coalesce(nullif(m.collective, ''), 'comm') AS concurrent_comm
        FROM compute_k c JOIN comm_k m
          ON c.run_id = m.run_id AND c.rank = m.rank AND c.device = m.device
         AND m.start_ns < c.end_ns AND m.end_ns > c.start_ns
        QUALIFY row_number() OVER (
            PARTITION BY c._idx
            ORDER BY least(c.end_ns, m.end_ns) - greatest(c.start_ns, m.start_ns) DESC, m.start_ns) = 1
    """).pl()
    con.close()
    return out


def comm_overlap(kernels: pl.DataFrame) -> pl.DataFrame:
    """Compute kernels with ``signature``, ``comm_overlap_ns``, ``comm_overlap_frac``, ``concurrent_comm``.

    ``comm_overlap_ns`` is the length of the kernel's intersection with the union of the communication
    kernels on the same (run, rank, device): exact, O(n log n) per device.
    """
    k = kernels.with_row_index("_idx")
    compute = k.filter(pl.col("kind") == "compute")
    comm = k.filter(pl.col("kind") == "comm")
    parts = []
    for key, grp in compute.group_by(GROUP, maintain_order=True):
        mine = comm.filter(*(pl.col(c) == v for c, v in zip(GROUP, key, strict=True)))
        us, ue = merge(mine["start_ns"].to_numpy(), mine["end_ns"].to_numpy())
        ov = overlap_with_union(us, ue, grp["start_ns"].to_numpy(), grp["end_ns"].to_numpy())
        parts.append(grp.select("_idx").with_columns(pl.Series("comm_overlap_ns", ov, dtype=pl.Int64)))
    overlap = pl.concat(parts) if parts else pl.DataFrame(schema={"_idx": pl.UInt32, "comm_overlap_ns": pl.Int64})
    out = compute.join(overlap, on="_idx", how="left", maintain_order="left")
    if comm.height:
        out = out.join(_concurrent_comm(compute, comm), on="_idx", how="left", maintain_order="left")
    else:
        out = out.with_columns(pl.lit(None, dtype=pl.String).alias("concurrent_comm"))
    dur = pl.col("duration_ns")
    return (
        out.with_columns(
            _signature(),
            pl.when(dur > 0).then(pl.col("comm_overlap_ns") / dur).otherwise(0.0).alias("comm_overlap_frac"),
        )
        .sort("_idx")
        .drop("_idx")
    )
