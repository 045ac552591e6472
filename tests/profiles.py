"""Synthetic profile folders for `traceql solve`'s tests: two made-up GPU types with numbers to check by hand.

``Test GPU fast``: batch b takes b ms forward, 2b backward, 2 ms in the optimizer; batches 1..8 fit, with
8 // b virtual workers (1 → 8, 2 → 4, 4 → 2, 8 → 1); 16 does not fit.
``Test GPU slow``: twice as slow (2b, 4b, 4 ms); batches 1..4 fit, with 4 // b virtual workers; 8 and 16 do not.
Buckets (measured on 2 × fast): cap 10 MB exposed 3 + tax 1 = 4 ms; 25 MB 2 + 1 = 3 ms; 50 MB no trace,
buckets of 2 and 5 ms: estimated 5 ms.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from traceql.collectors.profile_format import file_name, profile

FAST, SLOW = "Test GPU fast", "Test GPU slow"
BATCHES = (1, 2, 4, 8, 16)
MODEL = "synthetic"


def memory(gpu: str, fits_up_to: int, workers: dict[int, int], per_sample: int = 10) -> dict[str, Any]:
    rows = [{"batch": b, "peak_bytes": 20 + per_sample * b if b <= fits_up_to else None, "fits": b <= fits_up_to,
             "virtual_workers": workers.get(b, 0)} for b in BATCHES]
    return profile("memory", MODEL, gpu, memory_bytes=100, limit_bytes=100, static_bytes=20, batches=rows,
                   max_batch=fits_up_to)


def compute(gpu: str, scale: float) -> dict[str, Any]:
    rows = [{"batch": b, "forward_ms": scale * b, "backward_ms": scale * 2 * b, "optimizer_ms": scale * 2,
             "iterations": 10} for b in BATCHES]
    return profile("compute", MODEL, gpu, batches=rows)


def cap(cap_mb: float, allreduce: list[float], exposed: float | None, tax: float | None) -> dict[str, Any]:
    return {"cap_mb": cap_mb, "buckets": len(allreduce), "bucket_bytes": [cap_mb * 2**20] * len(allreduce),
            "allreduce_ms": allreduce, "exposed_comm_ms": exposed, "overlap_tax_ms": tax,
            "step_ms": None if exposed is None else 30.0, "batch": None if exposed is None else 8,
            "source": None if exposed is None else "runs/synthetic"}


def buckets(gpu: str = FAST) -> dict[str, Any]:
    caps = [cap(10, [1.0, 1.0, 1.5], 3.0, 1.0), cap(25, [1.5, 2.0], 2.0, 1.0), cap(50, [2.0, 5.0], None, None)]
    return profile("buckets", MODEL, gpu, world_size=2, interconnect="nvlink",
                   comm_model={"latency_ms": 0.5, "ms_per_mb": 0.1, "samples": 6}, caps=caps)


def synthetic() -> list[dict[str, Any]]:
    """The profiles of both GPU types and the fast one's buckets."""
    return [memory(FAST, 8, {1: 8, 2: 4, 4: 2, 8: 1}), compute(FAST, 1.0),
            memory(SLOW, 4, {1: 4, 2: 2, 4: 1}, per_sample=20), compute(SLOW, 2.0), buckets()]


def uneven(seed: int, gpu: str) -> list[dict[str, Any]]:
    """A memory and a compute profile of irregular made-up times (few ties), for comparing with brute force."""
    rng = random.Random(seed)
    fits = rng.choice([4, 8, 16])
    workers = {b: rng.randint(1, 6) for b in BATCHES if b <= fits}
    rows = [{"batch": b, "forward_ms": round(rng.uniform(0.5, 1.5) * b, 3),
             "backward_ms": round(rng.uniform(1.0, 3.0) * b, 3), "optimizer_ms": round(rng.uniform(1, 3), 3),
             "iterations": 10} for b in BATCHES if rng.random() > 0.15 or b == 1]
    return [memory(gpu, fits, workers), profile("compute", MODEL, gpu, batches=rows)]


def write(folder: Path, profiles: list[dict[str, Any]]) -> Path:
    """Each profile as ``<kind>-<gpu>.json`` in ``folder``; the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    for data in profiles:
        (folder / file_name(data["kind"], data["gpu"])).write_text(json.dumps(data, indent=1))
    return folder


def cluster(path: Path, *nodes: tuple[str, str, int]) -> Path:
    """A cluster file of (name, gpu, count) nodes."""
    path.write_text(json.dumps({"nodes": [{"name": n, "gpu": g, "count": c} for n, g, c in nodes]}))
    return path
