"""nccl-tests' bus bandwidth of a run's all-reduces, read straight from its nsys exports with sqlite3: each rank's
all-reduce kernels in time order, the k-th of every rank one collective, its transfer the shortest of the ranks'
kernels (the rank that waited least), its size the k-th DDP bucket (in reduce order, round after round)."""

from __future__ import annotations

import sqlite3
import statistics
from pathlib import Path


def allreduce_durations(export: Path) -> list[int]:
    """The durations (ns) of one rank's export's all-reduce kernels, in start order."""
    con = sqlite3.connect(f"{export.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return [d for (d,) in con.execute("""
            SELECT k."end" - k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName
            WHERE s.value LIKE 'ncclDevKernel_AllReduce%' OR s.value LIKE 'ncclKernel_AllReduce%'
            ORDER BY k.start""")]
    finally:
        con.close()


def busbw(exports: list[Path], buckets: list[int]) -> list[float]:
    """GB/s of every all-reduce held by all ``exports`` (one per rank): bytes / transfer x 2(n-1)/n."""
    per_rank = [allreduce_durations(e) for e in exports]
    n = len(exports)
    rounds = min(len(d) for d in per_rank) // len(buckets) * len(buckets)
    return [buckets[k % len(buckets)] / min(d[k] for d in per_rank) * 2 * (n - 1) / n for k in range(rounds)]


def median_busbw(exports: list[Path], buckets: list[int]) -> float:
    return statistics.median(busbw(exports, buckets))
