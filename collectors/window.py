"""The profiled window of a run: which steps are profiled, the marks and profiler around them, step times.

The window is ``window_steps`` steps in the middle of the last epoch. nsys and ncu see it between
cudaProfilerStart/Stop; torch.profiler runs its schedule over it. Each step of the window is an NVTX range
``step_<i>`` (steps outside it: ``epoch<e>_step_<i>``), also a ``record_function`` range of that name under
torch.profiler. Inside a step, its CPU sections are ranges too (:meth:`Window.section`: ``forward``,
``backward``, ``optimizer``; ``all-reduce`` where the gradients are all-reduced after the backward): what the
launches a GPU waited for are told apart by.

*Isolated steps* (``isolated_steps``) are extra steps inside the window run with communication off: the
same forward and backward under DDP's ``no_sync()``, gradients dropped, no optimizer step, each in a range
``step_<i>_nosync`` just before window step ``i``. Their kernels are the in-run isolated reference that
labels the normal steps' kernels (each compared with its twin).
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from traceql.collectors.counterfactuals import GpuDelay
from traceql.collectors.files import atomic_path


class Window:
    """The profiled steps of a run, and the marks and profiler around them."""

    def __init__(self, args: argparse.Namespace, rank: int, use_cuda: bool, steps_per_epoch: int | None) -> None:
        import torch

        self.torch, self.args, self.rank, self.cuda = torch, args, rank, use_cuda
        span = args.window_steps
        self.count = min(span, steps_per_epoch) if steps_per_epoch else span
        self.start = max((steps_per_epoch - self.count) // 2, 0) if steps_per_epoch else 0
        self.epoch = args.epochs - 1
        self.profiled = args.profiler != "none" and rank in args.profile_ranks
        self.prof: Any = None  # torch.profiler's profile while it records
        self.files: list[str] = []
        self.times: list[dict[str, Any]] = []
        self.run_dir = Path(args.run)
        self.base = self.run_dir / "traces" / f"{args.run_name}_rank{rank}"
        lag = getattr(args, "straggler", None)
        self.sleeps = (lag[1], lag[2] / 1e3) if lag and lag[0] == rank else (frozenset(), 0.0)
        self.sleep_at = getattr(args, "straggler_at", "start")
        late = getattr(args, "gpu_delay", None)
        self.delay = GpuDelay(late[1], late[2]) if late and late[0] == rank and use_cuda else None
        mine = rank in args.profile_ranks  # with --profiler none too: the cost of isolated steps, unprofiled
        self.isolated_at = isolated_positions(args, self.start, self.count) if mine else set()

    def isolated_before(self, epoch: int, index: int) -> bool:
        """Whether an isolated step runs just before step ``index`` of ``epoch``."""
        return epoch == self.epoch and index in self.isolated_at

    def _capture_range(self, call: str) -> bool:
        """Wait for the GPU; then start or stop nsys/ncu's capture range (``call``) if one profiles this
        rank. True when it did."""
        if self.cuda:
            self.torch.cuda.synchronize()
        native = self.args.profiler in ("nsys", "ncu") and self.profiled
        if native:
            getattr(self.torch.cuda.cudart(), call)()
        return native

    def _begin(self) -> None:
        if not self._capture_range("cudaProfilerStart") and self.args.profiler == "torch" and self.profiled:
            from torch.profiler import ProfilerActivity, profile, schedule

            acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
            a = self.args
            self.prof = profile(
                activities=acts, record_shapes=True, profile_memory=True,
                schedule=schedule(wait=a.torch_wait, warmup=a.torch_warmup, active=a.torch_active,
                                  repeat=a.torch_repeat, skip_first=a.torch_skip_first),
                on_trace_ready=self._trace_ready)
            self.prof.__enter__()

    def _trace_ready(self, prof: Any) -> None:
        """Write the cycle's trace for TensorBoard, and a gzipped copy as this rank's trace."""
        from torch.profiler import tensorboard_trace_handler

        tb = self.run_dir / "traces" / "tensorboard"
        before = set(tb.glob(f"rank{self.rank}.*.pt.trace.json")) if tb.exists() else set()
        tensorboard_trace_handler(str(tb), worker_name=f"rank{self.rank}")(prof)  # a trace saves once
        (written,) = set(tb.glob(f"rank{self.rank}.*.pt.trace.json")) - before
        final = self.base.with_name(self.base.name + ".json.gz")
        if final.exists():  # a later repeat cycle: keep the earlier one aside
            cycles = final.parent / "cycles"
            cycles.mkdir(exist_ok=True)
            os.replace(final, cycles / f"{final.name[:-8]}_cycle{len(list(cycles.iterdir()))}.json.gz")
        with atomic_path(final) as part, written.open("rb") as src, gzip.open(part, "wb") as dst:
            shutil.copyfileobj(src, dst)
        for path in (final, written):
            if str(path.relative_to(self.run_dir)) not in self.files:
                self.files.append(str(path.relative_to(self.run_dir)))

    def _end(self) -> None:
        torch = self.torch
        if not self._capture_range("cudaProfilerStop") and self.prof is not None:
            self.prof.__exit__(None, None, None)
            key = "cuda_time_total" if self.cuda else "cpu_time_total"
            tables = {"ops": self.prof.key_averages().table(sort_by=key, row_limit=60),
                      "memory": (torch.cuda.memory_summary() if self.cuda else "")
                      + self.prof.key_averages().table(sort_by="self_cpu_memory_usage", row_limit=30)}
            for kind, text in tables.items():
                path = self.base.with_name(f"{self.base.name}_{kind}.txt")
                path.write_text(text)
                self.files.append(str(path.relative_to(self.run_dir)))
            self.prof = None

    @contextmanager
    def _marked(self, name: str) -> Iterator[None]:
        """An NVTX range ``name`` on CUDA, and a record_function range under torch.profiler."""
        torch = self.torch
        if self.cuda:
            torch.cuda.nvtx.range_push(name)
        with torch.profiler.record_function(name) if self.prof is not None else _nothing():
            yield
            if self.cuda:
                torch.cuda.synchronize()
        if self.cuda:
            torch.cuda.nvtx.range_pop()

    @contextmanager
    def section(self, name: str) -> Iterator[None]:
        """A CPU section of a step (``forward`` ...): an NVTX range on CUDA, a record_function range under
        torch.profiler; nothing waits for the GPU."""
        if self.cuda:
            self.torch.cuda.nvtx.range_push(name)
        try:
            with self.torch.profiler.record_function(name) if self.prof is not None else _nothing():
                yield
        finally:
            if self.cuda:
                self.torch.cuda.nvtx.range_pop()

    @contextmanager
    def step(self, epoch: int, index: int) -> Iterator[None]:
        first = epoch == self.epoch and index == self.start
        inside = epoch == self.epoch and self.start <= index < self.start + self.count
        if first:
            self._begin()
        t0 = time.perf_counter()
        with self._marked(f"step_{index}" if inside else f"epoch{epoch}_step_{index}"):
            if inside and index in self.sleeps[0] and self.sleep_at == "start":  # the injected straggler: late
                time.sleep(self.sleeps[1])
            if inside and self.delay is not None:  # the injected GPU delay: a spin kernel on the compute stream
                self.delay.at(index)
            yield
        self.times.append({"epoch": epoch, "step": index, "ms": (time.perf_counter() - t0) * 1e3, "window": inside})
        if inside and self.prof is not None:
            self.prof.step()
        if inside and index == self.start + self.count - 1:
            self._end()

    def after_backward(self, epoch: int, index: int) -> None:
        """The injected straggler's sleep where it is asked for after the backward (``--straggler-at
        backward``): the CPU sleeps while the GPU runs what the backward queued."""
        inside = epoch == self.epoch and self.start <= index < self.start + self.count
        if inside and index in self.sleeps[0] and self.sleep_at == "backward":
            time.sleep(self.sleeps[1])

    @contextmanager
    def isolated(self, epoch: int, index: int) -> Iterator[None]:
        """The isolated step before step ``index``: the caller runs forward and backward inside it with
        communication off (DDP's ``no_sync()``) and drops the gradients."""
        t0 = time.perf_counter()
        with self._marked(f"step_{index}_nosync"):
            yield
        self.times.append({"epoch": epoch, "step": index, "ms": (time.perf_counter() - t0) * 1e3, "window": True,
                           "isolated": True})


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def profiled_positions(args: argparse.Namespace, start: int, count: int) -> list[int]:
    """The window steps an isolated step may precede: those the profiler records, but the window's first
    (nsys and ncu start capturing with it)."""
    if args.profiler == "torch":
        first = start + args.torch_skip_first + args.torch_wait + args.torch_warmup
        return list(range(first, min(first + args.torch_active, start + count)))
    return list(range(start + 1, start + count))


def isolated_positions(args: argparse.Namespace, start: int, count: int) -> set[int]:
    """``args.isolated_steps`` window steps, spread evenly over those an isolated step may precede."""
    wanted = getattr(args, "isolated_steps", 0) or 0
    slots = profiled_positions(args, start, count)
    if not wanted or not slots:
        return set()
    n = min(wanted, len(slots))
    return {slots[round(j * (len(slots) - 1) / max(n - 1, 1))] for j in range(n)} if n > 1 else {slots[0]}
