"""DDP's gradient buckets: how DDP packs a model's gradients into them, each bucket's all-reduce time read from a
trace, and the one model of an all-reduce's time that `whatif --bucket-cap`, `profile buckets`, `solve` and
`collectives` share.

DDP packs the trained parameters' gradients into buckets, in the reverse of the order the model registered them,
a bucket closing once it holds the cap (:func:`pack`), and reduces its buckets in that order, one all-reduce each,
the same in every step: the k-th ``AllReduce`` of a normal step is bucket k. Its time is the kernel's duration on
the rank that came to it last (``traceql.analyzers.stragglers``): that rank waited for nobody, so its kernel lasted
the transfer alone; the other ranks' kernels also hold their wait.

An all-reduce of ``b`` bytes alone takes ``latency + b × ns_per_byte`` (:class:`AllReduceTime`): fitted to
measured (bytes, time) pairs, or taken from a bus bandwidth as nccl-tests defines it (an all-reduce on ``n`` ranks
moves ``2(n-1)/n`` of its buffer over each rank's link: :func:`allreduce_factor`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from traceql.analyzers.units import MIB

if TYPE_CHECKING:  # polars only where a trace is read: `solve` prices a profile without it
    import polars as pl

Ranks = TypeVar("Ranks", float, "pl.Expr")  # an int counts as a float: 2(n-1)/n is one
Size = TypeVar("Size", float, np.ndarray)


def pack(param_bytes: Sequence[int], cap_mb: float) -> list[int]:
    """DDP's buckets at ``cap_mb``: the gradients (``param_bytes``, in registration order) taken in reverse, a
    bucket closed once it holds ``cap_mb`` MiB; each bucket's bytes, in the order they are reduced."""
    cap, out, held = cap_mb * MIB, [], 0
    for size in reversed(param_bytes):
        held += int(size)
        if held >= cap:
            out.append(held)
            held = 0
    return [*out, held] if held else out


def own_buckets(recorded: Sequence[int] | None, param_bytes: Sequence[int] | None,
                cap_mb: float | None) -> list[int] | None:
    """A run's own buckets (bytes, in reduce order): as its ranks recorded them (``recorded``), else DDP's packing
    of its gradients (``param_bytes``) at its cap; None where neither is known."""
    if recorded:
        return [int(b) for b in recorded]
    return pack(param_bytes, cap_mb) if param_bytes and cap_mb is not None else None


def allreduce_factor(ranks: Ranks) -> Ranks:
    """nccl-tests' bus bandwidth factor of an all-reduce on ``ranks`` ranks: ``2(n-1)/n`` (a number or a polars
    expression)."""
    return 2 * (ranks - 1) / ranks


@dataclass(frozen=True)
class AllReduceTime:
    """An all-reduce's time with nothing beside it: ``latency_ns + bytes × ns_per_byte``."""

    latency_ns: float
    ns_per_byte: float

    def alone(self, size: Size) -> Size:
        """The time (ns) of an all-reduce of ``size`` bytes (or of each of an array of sizes)."""
        return self.latency_ns + size * self.ns_per_byte

    @classmethod
    def fit(cls, size: Sequence[float] | np.ndarray, time_ns: Sequence[float] | np.ndarray, *,
            relative: bool = True) -> AllReduceTime | None:
        """The line through (bytes, ns) pairs by least squares, on relative errors (one slow bucket does not set
        the line) or, without ``relative``, on absolute ones; neither term below 0: where the free fit puts one
        below 0 (or the pairs hold one size), each term is fitted alone with the other at 0 and the better of
        the two kept. Pairs of no time are left out; None where none is left."""
        x, y = _pairs(size, time_ns)
        if not len(x):
            return None
        free = cls.free(x, y, relative=relative)
        if free is not None and free.latency_ns >= 0 and free.ns_per_byte >= 0:
            return free
        w = 1 / y if relative else np.ones_like(y)
        wx, wy = w * x, w * y
        through_zero = cls(0.0, max(0.0, float(np.sum(wx * wy) / np.sum(wx * wx))) if np.any(wx) else 0.0)
        constant = cls(max(0.0, float(np.sum(w * wy) / np.sum(w * w))), 0.0)
        return min((through_zero, constant), key=lambda m: float(np.sum((w * (y - m.alone(x))) ** 2)))

    @classmethod
    def free(cls, size: Sequence[float] | np.ndarray, time_ns: Sequence[float] | np.ndarray, *,
             relative: bool = True) -> AllReduceTime | None:
        """The line :meth:`fit` starts from, either term free to fall below 0; None where the pairs hold fewer
        than two sizes."""
        x, y = _pairs(size, time_ns)
        if len(np.unique(x)) < 2:
            return None
        slope, intercept = np.polyfit(x, y, 1, w=1 / y if relative else None)
        return cls(float(intercept), float(slope))

    @classmethod
    def from_busbw(cls, busbw_gbps: float, ranks: int, latency_ns: float = 0.0) -> AllReduceTime:
        """The all-reduce of ``ranks`` ranks at a bus bandwidth of ``busbw_gbps`` GB/s (bytes per ns), as
        `collectives` measures it."""
        return cls(latency_ns, allreduce_factor(ranks) / busbw_gbps)

    @classmethod
    def from_profile(cls, model: dict[str, float] | None) -> AllReduceTime | None:
        """The model a buckets profile records (``comm_model``: ``latency_ms`` and ``ms_per_mb``); None without."""
        if not model:
            return None
        return cls(model["latency_ms"] * 1e6, model["ms_per_mb"] * 1e6 / MIB)

    def to_profile(self, samples: int) -> dict[str, float | int]:
        """This model as a buckets profile records it: ``latency_ms``, ``ms_per_mb`` (ms a MiB), ``samples``."""
        return {"latency_ms": round(self.latency_ns / 1e6, 4), "ms_per_mb": round(self.ns_per_byte * MIB / 1e6, 5),
                "samples": samples}


def _pairs(size: Sequence[float] | np.ndarray, time_ns: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The (bytes, ns) pairs of some time, as arrays."""
    x, y = np.asarray(size, np.float64), np.asarray(time_ns, np.float64)
    return x[y > 0], y[y > 0]


def bucket_times(arrivals: pl.DataFrame) -> pl.DataFrame:
    """Per all-reduce index k of a step (``bucket``): the median over steps of its time on the last rank to
    come (``allreduce_ns``) and in how many steps it was seen (``steps``)."""
    import polars as pl

    last = (arrivals.filter(pl.col("last") & pl.col("collective").str.starts_with("AllReduce"))  # any algorithm
            .sort("run_id", "step", "arrival_ns")
            .with_columns(pl.int_range(pl.len(), dtype=pl.Int64).over("run_id", "step").alias("bucket")))
    return (last.group_by("bucket")
            .agg(pl.col("duration_ns").median().alias("allreduce_ns"), pl.col("step").n_unique().alias("steps"))
            .sort("bucket"))
