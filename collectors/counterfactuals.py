"""Runs that answer "what if": communication deferred until after the backward, a rank's GPU delayed.

*Serialized communication* (local_config ``"comm": "serial"``): a DDP communication hook keeps each gradient
bucket (scaled by 1 / world size, as stock DDP scales it) and hands DDP a future of it; when the last bucket is
ready (the backward's gradients all computed) it all-reduces the kept buckets in the order DDP made them ready
and completes their futures, and DDP copies the sums into the gradients as it does stock. Same buckets, same
NCCL kernels, same arithmetic, same copies as stock DDP: only nothing overlaps the backward's compute. A
measured run of the counterfactual the what-if predicts.

*Alternating communication* (``"comm": "alternate"``): the same hook, deferring in odd steps (``step % 2 == 1``)
and all-reducing each bucket as it comes in even ones (as stock DDP's own hook does: scaled, all-reduced
asynchronously). Stock and serialized steps in one process, on one CPU and one GPU: where a launch-bound model's
step moves tens of ms from run to run, the pair within a run is the measured saving.

*GPU delay* (local_config ``"gpu_delay": {"rank": R, "steps": [i, ...], "ms": M}``): at the start of window
steps ``i`` rank R puts a spin kernel of about M ms on its compute stream, so its GPU (not its CPU) is late:
what a slow GPU, a rank with extra work or a throttled clock look like. The kernel's length is calibrated
once per rank against CUDA events; the rank's result records the cycles and the length it measured.
"""

from __future__ import annotations

from typing import Any


class SerialComm:
    """A DDP model's gradient all-reduces deferred until every bucket is ready (the backward's gradients done)."""

    def __init__(self, model: Any) -> None:
        import torch.distributed as dist

        self.dist = dist
        self.world = dist.get_world_size()
        self.kept: list[tuple[Any, Any]] = []
        self.reduced = 0
        self.deferring = True  # comm=alternate turns it off in its stock steps
        model.register_comm_hook(None, self._keep)

    # DDP checks a hook's annotations (a string one fails): none is safe, so its types are in a type comment
    def _keep(self, _state, bucket):  # type: (Any, Any) -> Any
        import torch

        buffer = bucket.buffer()
        buffer.mul_(1.0 / self.world)  # stock DDP scales each gradient as it enters its bucket; a hook must
        if not self.deferring:  # a stock step of comm=alternate: all-reduced now, as DDP's own hook does
            self.reduced += 1
            return self.dist.all_reduce(buffer, async_op=True).get_future().then(lambda f: f.value()[0])
        future: torch.futures.Future = torch.futures.Future()
        self.kept.append((buffer, future))
        if bucket.is_last():  # every bucket ready: reduce them all, in the order DDP made them ready
            self._reduce()
        return future  # DDP copies each reduced bucket into its gradients, as it does stock

    def _reduce(self) -> None:
        kept, self.kept = self.kept, []
        for buffer, future in kept:
            self.dist.all_reduce(buffer)
            future.set_result(buffer)
        self.reduced += len(kept)

    def flush(self) -> int:
        """After the backward: the buckets reduced since the last call (any still kept reduced now)."""
        self._reduce()
        reduced, self.reduced = self.reduced, 0
        return reduced


def defer_communication(model: Any, comm: str) -> SerialComm | None:
    """For ``comm`` ``"serial"`` or ``"alternate"`` and a DDP model of several ranks, its all-reduces deferred
    (``alternate``: the caller sets ``deferring`` each step, :func:`serial_step`); else None."""
    if comm not in ("serial", "alternate"):
        return None
    if not hasattr(model, "register_comm_hook"):
        raise RuntimeError(f"comm {comm} defers DDP's gradient all-reduces, and get_model() returned "
                           f"a {type(model).__name__}, not DistributedDataParallel")
    return SerialComm(model)


def serial_step(comm: str, index: int) -> bool:
    """Whether step ``index`` (of its epoch) defers its all-reduces: every step under ``serial``, the odd ones
    under ``alternate``."""
    return comm == "serial" or (comm == "alternate" and index % 2 == 1)


class GpuDelay:
    """A spin kernel of a set length on this rank's current stream, at chosen window steps."""

    def __init__(self, steps: frozenset[int], ms: float) -> None:
        import torch

        self.torch, self.steps, self.ms = torch, steps, ms
        self.cycles = self._calibrate(ms)

    def _calibrate(self, ms: float) -> int:
        """The spin cycles that take ``ms`` on this GPU, from a timed probe of a known count."""
        torch = self.torch
        probe = 10_000_000
        torch.cuda._sleep(probe)  # the first launch loads the kernel
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.cuda._sleep(probe)
        end.record()
        end.synchronize()
        return max(int(probe * ms / start.elapsed_time(end)), 1)

    def measured_ms(self) -> float:
        """How long the calibrated spin takes now (for the rank's result)."""
        torch = self.torch
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.cuda._sleep(self.cycles)
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end))

    def at(self, index: int) -> None:
        """Delay the GPU if window step ``index`` is one of the chosen steps."""
        if index in self.steps:
            self.torch.cuda._sleep(self.cycles)

    def record(self) -> dict[str, Any]:
        return {"steps": sorted(self.steps), "ms": self.ms, "cycles": self.cycles, "measured_ms": self.measured_ms()}


def rank_steps_ms(text: str) -> tuple[int, frozenset[int], float]:
    """``RANK:STEPS:MS`` (e.g. ``1:2,4:40``) as (rank, steps, ms): the driver's --straggler and --gpu-delay."""
    rank, steps, ms = text.split(":")
    return int(rank), frozenset(int(i) for i in steps.split(",")), float(ms)
