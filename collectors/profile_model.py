"""Memory and compute profiles of an input folder's model on this device, in a process of their own.

    python -m traceql.collectors.profile_model --input DIR --kind memory|compute --out FILE [options]

The model is ``define_model.get_model(0, cap)`` alone (no process group, so no DDP), its data
``get_dataloader(0, batch)``'s first batch, and a training step ``forward_pass``, ``backward_pass`` and an
SGD step, as the driver runs them.

*Memory*: batch sizes are tried doubling from 1, then bisected between the largest that fits and the
smallest that does not. On CUDA a batch fits when its step ran without running out of memory and its peak
(``max_memory_allocated``) is within the limit; an out-of-memory error is caught, the step's tensors
dropped and the cache emptied before the next try; the process exits at the end, so nothing keeps holding
memory. On CPU (no device memory to run out of) the peak is the static memory plus the bytes the forward
saved for the backward (counted with ``saved_tensors_hooks``), and a batch fits when that is within
``--memory-limit``. The static memory is counted from the tensors themselves: weights, gradients and
optimizer state.

*Compute*: for each batch size, ``--warmup`` steps, then ``--iterations`` timed steps; each phase
(forward, backward, optimizer) is timed alone, the device synchronised before and after it; medians.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from traceql.collectors.driver import load_module
from traceql.collectors.files import write_json
from traceql.collectors.profile_format import file_name, profile


class Step:
    """One model and its optimizer on this device; ``run(batch)`` a timed training step."""

    def __init__(self, folder: Path, cap: float) -> None:
        import torch

        self.torch = torch
        self.mod = load_module(folder / "define_model.py")
        self.model = self.mod.get_model(0, cap)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=1e-4)
        self.cuda = next(self.model.parameters()).is_cuda
        self.gpu = torch.cuda.get_device_name() if self.cuda else "cpu"

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def inputs(self, batch: int) -> Any:
        return self.mod.get_dataloader(0, batch)[0][0]

    def run(self, inputs: Any, saved: list[int] | None = None) -> tuple[float, float, float]:
        """A step on ``inputs``: (forward, backward, optimizer) in ms; ``saved`` gets the bytes the forward
        saved for the backward."""
        def keep(t: Any) -> Any:
            assert saved is not None  # keep is hooked only where saved is given
            saved.append(t.numel() * t.element_size())
            return t

        hooks = self.torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t) if saved is not None else None
        times = []
        self.sync()
        t0 = time.perf_counter()
        if hooks is not None:
            with hooks:
                out = self.mod.forward_pass(self.model, inputs)
        else:
            out = self.mod.forward_pass(self.model, inputs)
        self.sync()
        times.append(time.perf_counter())
        self.mod.backward_pass(out)
        self.sync()
        times.append(time.perf_counter())
        self.opt.step()
        self.opt.zero_grad(set_to_none=False)  # gradients stay allocated: they are part of the static memory
        self.sync()
        times.append(time.perf_counter())
        return (times[0] - t0) * 1e3, (times[1] - times[0]) * 1e3, (times[2] - times[1]) * 1e3

    def static_bytes(self) -> int:
        tensors = [p for p in self.model.parameters()] + [p.grad for p in self.model.parameters() if p.grad is not None]
        tensors += [v for state in self.opt.state.values() for v in state.values() if self.torch.is_tensor(v)]
        return sum(t.numel() * t.element_size() for t in tensors)


def _try(step: Step, batch: int, limit: int) -> int | None:
    """The peak bytes of a step at ``batch``; None when it does not fit in ``limit``."""
    torch = step.torch
    inputs = None
    try:
        inputs = step.inputs(batch)
        if step.cuda:
            torch.cuda.reset_peak_memory_stats()
            step.run(inputs)
            peak = int(torch.cuda.max_memory_allocated())
        else:
            saved: list[int] = []
            step.run(inputs, saved)
            peak = step.static_bytes() + sum(saved)
    except torch.OutOfMemoryError:
        peak = None
    finally:
        del inputs
        gc.collect()
        if step.cuda:
            torch.cuda.empty_cache()
    return peak if peak is not None and peak <= limit else None


def memory(step: Step, limit: int, max_batch: int, progress: Callable[[str], None]) -> dict[str, Any]:
    step.run(step.inputs(1))  # gradients and optimizer state exist from here on
    static = step.static_bytes()
    tried: dict[int, int | None] = {}

    def fits(batch: int) -> bool:
        tried[batch] = _try(step, batch, limit)
        progress(f"batch {batch}: {'fits' if tried[batch] is not None else 'does not fit'}")
        return tried[batch] is not None

    good, bad, batch = 0, None, 1
    while batch <= max_batch and fits(batch):
        good, batch = batch, batch * 2
    bad = batch if batch <= max_batch else None
    if bad is None and good < max_batch:  # every doubling up to the cap fitted: the cap itself, else between
        good, bad = (max_batch, None) if fits(max_batch) else (good, max_batch)
    while bad is not None and bad - good > 1:
        mid = (good + bad) // 2
        good, bad = (mid, bad) if fits(mid) else (good, mid)
    rows = [{"batch": b, "peak_bytes": p, "fits": p is not None,
             "virtual_workers": (limit - static) // max(p - static, 1) if p is not None else 0}
            for b, p in sorted(tried.items())]
    total = int(step.torch.cuda.get_device_properties(0).total_memory) if step.cuda else limit
    return {"memory_bytes": total, "limit_bytes": limit, "static_bytes": static, "batches": rows,
            "max_batch": good or None}


def compute(step: Step, batches: list[int], warmup: int, iterations: int,
            progress: Callable[[str], None]) -> dict[str, Any]:
    rows = []
    for batch in batches:
        inputs = step.inputs(batch)
        for _ in range(warmup):
            step.run(inputs)
        phases = list(zip(*(step.run(inputs) for _ in range(iterations)), strict=True))
        med = [round(statistics.median(p), 4) for p in phases]
        rows.append({"batch": batch, "forward_ms": med[0], "backward_ms": med[1], "optimizer_ms": med[2],
                     "iterations": iterations})
        progress(f"batch {batch}: {sum(med):.2f} ms a step")
        del inputs
    return {"batches": rows}


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m traceql.collectors.profile_model")
    ap.add_argument("--input", required=True)
    ap.add_argument("--kind", required=True, choices=["memory", "compute"])
    ap.add_argument("--out", required=True, help="the profile folder: the file is named after its kind and GPU")
    ap.add_argument("--model", required=True)
    ap.add_argument("--cap-size", type=float, default=25)
    ap.add_argument("--memory-limit", type=int, default=None)
    ap.add_argument("--max-batch", type=int, default=1024)
    ap.add_argument("--batches", type=lambda s: [int(x) for x in s.split(",") if x], default=None)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=10)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    step = Step(Path(args.input), args.cap_size)

    def progress(text: str) -> None:
        print(f"{args.kind}: {text}", file=sys.stderr, flush=True)

    if args.kind == "memory":
        limit = args.memory_limit
        if limit is None:
            if not step.cuda:
                raise SystemExit("on CPU the search needs --memory-limit (there is no device memory to fill)")
            limit = int(step.torch.cuda.get_device_properties(0).total_memory)
        fields = memory(step, limit, args.max_batch, progress)
    else:
        fields = compute(step, args.batches or [1, 2, 4, 8], args.warmup, args.iterations, progress)
    path = write_json(Path(args.out) / file_name(args.kind, step.gpu), profile(args.kind, args.model, step.gpu,
                                                                                **fields))
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
