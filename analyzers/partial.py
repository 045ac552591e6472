"""Runs that are part of a larger job: collectives whose peers the trace does not hold.

A collective needs every rank of its communicator; a trace of one rank of a DDP job holds its all-reduces but
not the ranks they waited on. Such a run's stragglers, critical path and what-ifs are one rank's view of a
job (its waits look like contention or idle time, and nothing can name the rank that was late). A run is
*partial* when it launched communication and its ranks are not all of ``0 .. n-1`` of the job: its highest
rank number is at least the number of ranks it holds, or it holds a single rank whose communication ran on a
single GPU (one process driving several GPUs, as some tensor-parallel runs do, holds all its peers).
"""

from __future__ import annotations

import polars as pl


def comm_devices(kernels: pl.DataFrame) -> pl.DataFrame:
    """``run_id, device`` of every GPU that ran communication (what :func:`partial_runs` needs of a run's
    kernels, from each part of it)."""
    return kernels.filter(pl.col("kind") == "comm").select("run_id", "device").unique()


def partial_runs(devices: pl.DataFrame, ranks: pl.DataFrame) -> pl.DataFrame:
    """``run_id, ranks`` (the rank numbers it holds, sorted) of every partial run (module doc), from
    :func:`comm_devices` and the model's ranks (``run_id, rank``)."""
    comm = devices.group_by("run_id").agg(pl.col("device").n_unique().alias("_devices"))
    held = ranks.group_by("run_id").agg(pl.col("rank").unique().sort().alias("ranks"))
    out = held.join(comm, on="run_id", how="inner").filter(
        (pl.col("ranks").list.max() >= pl.col("ranks").list.len())
        | ((pl.col("ranks").list.len() == 1) & (pl.col("_devices") == 1)))
    return out.select("run_id", "ranks").sort("run_id")


def partial_notes(devices: pl.DataFrame, ranks: pl.DataFrame) -> list[str]:
    """One warning per partial run: what every command that reads it says."""
    notes = []
    for run_id, held in partial_runs(devices, ranks).iter_rows():
        which = f"rank {held[0]}" if len(held) == 1 else f"ranks {', '.join(map(str, held))}"
        notes.append(f"warning: {run_id}: part of a larger job ({which} alone; its collectives' peers are "
                     "absent): stragglers, the critical path and the what-if are this part's view; give every "
                     "rank's trace")
    return notes
