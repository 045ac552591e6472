"""The training driver one rank runs: build the model and data from define_model.py, train, profile a window.

    python -m collectors.driver --input DIR --run RUN_DIR --profiler nsys|ncu|torch|none [options]

Rank and world size come from the launcher's environment (torchrun's RANK/WORLD_SIZE/LOCAL_RANK, or
mpirun's OMPI_COMM_WORLD_*, PMI_*, SLURM_*). The profiled window is ``--steps`` steps in the middle of the
last epoch, between cudaProfilerStart/Stop, each step inside an NVTX range ``step_<i>``. The rank's result
(status, versions, step times, files) is written to RUN_DIR/results/rank<R>.json, also when it fails.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import os
import platform
import shutil
import sys
import time
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Any

RANK_ENV = (("RANK", "WORLD_SIZE", "LOCAL_RANK"),
            ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
            ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"),
            ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"))


def rank_from_env() -> tuple[int, int, int]:
    """(rank, world_size, local_rank) from whichever launcher set them; (0, 1, 0) alone."""
    for rank, world, local in RANK_ENV:
        if rank in os.environ:
            return int(os.environ[rank]), int(os.environ.get(world, "1")), int(os.environ.get(local, "0"))
    return 0, 1, 0


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    os.replace(tmp, path)


def load_module(path: Path, name: str = "define_model") -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[name] = module  # dataclasses and pickling look their module up here
    sys.path.insert(0, str(path.parent))
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


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
        self.prof = None
        self.files: list[str] = []
        self.times: list[dict[str, Any]] = []
        self.run_dir = Path(args.run)
        self.base = self.run_dir / "traces" / f"{args.run_name}_rank{rank}"

    def _begin(self) -> None:
        torch = self.torch
        if self.cuda:
            torch.cuda.synchronize()
        if self.args.profiler in ("nsys", "ncu") and self.profiled:
            torch.cuda.cudart().cudaProfilerStart()
        elif self.args.profiler == "torch" and self.profiled:
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
        part = final.with_name(final.name + ".part")
        with written.open("rb") as src, gzip.open(part, "wb") as dst:
            shutil.copyfileobj(src, dst)
        os.replace(part, final)
        for path in (final, written):
            if str(path.relative_to(self.run_dir)) not in self.files:
                self.files.append(str(path.relative_to(self.run_dir)))

    def _end(self) -> None:
        torch = self.torch
        if self.cuda:
            torch.cuda.synchronize()
        if self.args.profiler in ("nsys", "ncu") and self.profiled:
            torch.cuda.cudart().cudaProfilerStop()
        elif self.prof is not None:
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
    def step(self, epoch: int, index: int):  # noqa: ANN201 - a context manager
        torch = self.torch
        first = epoch == self.epoch and index == self.start
        inside = epoch == self.epoch and self.start <= index < self.start + self.count
        if first:
            self._begin()
        if self.cuda:
            torch.cuda.nvtx.range_push(f"step_{index}" if inside else f"epoch{epoch}_step_{index}")
        t0 = time.perf_counter()
        yield
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_pop()
        self.times.append({"epoch": epoch, "step": index, "ms": (time.perf_counter() - t0) * 1e3, "window": inside})
        if inside and self.prof is not None:
            self.prof.step()
        if inside and index == self.start + self.count - 1:
            self._end()


def versions(torch: Any, use_cuda: bool) -> dict[str, Any]:
    out = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda}
    if use_cuda:
        try:
            out["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        except Exception:  # noqa: BLE001 - a build without NCCL
            out["nccl"] = None
        out["gpu"] = torch.cuda.get_device_name()
    return out


def train(args: argparse.Namespace, result: dict[str, Any]) -> None:
    import torch
    import torch.distributed as dist

    rank, world, local = rank_from_env()
    result.update(rank=rank, world_size=world, local_rank=local)
    use_cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    if use_cuda and not torch.cuda.is_available():
        raise RuntimeError("no GPU visible to this rank, but --device cuda (NCCL) was asked for")
    if use_cuda:
        torch.cuda.set_device(local)
    backend = "nccl" if use_cuda else "gloo"
    result.update(device="cuda" if use_cuda else "cpu", backend=backend, versions=versions(torch, use_cuda))
    if world > 1:
        dist.init_process_group(backend)
    mod = load_module(Path(args.input) / "define_model.py")
    model = mod.get_model(rank, args.cap_size)
    loader = mod.get_dataloader(rank, args.batchsize)
    spe = len(loader) if hasattr(loader, "__len__") else None
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    window = Window(args, rank, use_cuda, spe)
    result["window"] = {"epoch": window.epoch, "start": window.start, "steps": window.count, "steps_per_epoch": spe,
                        "profiled": window.profiled}
    for epoch in range(args.epochs):
        for index, (inputs, _labels) in enumerate(loader):  # the contract: (inputs, labels) pairs
            with window.step(epoch, index):
                out = mod.forward_pass(model, inputs)
                mod.backward_pass(out)
                opt.step()
                opt.zero_grad(set_to_none=True)
    result["step_times_ms"] = window.times
    result["files"] = window.files
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()


@contextmanager
def script_session(steps_per_epoch: int | None = None):  # noqa: ANN201 - a context manager
    """For a train_script.py: the rank, device, process group, profiled window and result file of a run.

    The launcher's settings arrive as TRACEQL_DRIVER_ARGS (the driver's own command line)::

        from collectors.driver import script_session
        with script_session() as s:             # s.rank, s.world, s.device, s.args, s.window, s.result
            for epoch in range(s.args.epochs):
                for i in range(steps):
                    with s.window.step(epoch, i):
                        ...
    """
    import torch
    import torch.distributed as dist

    args = parse(json.loads(os.environ.get("TRACEQL_DRIVER_ARGS", "[]")) or None)
    rank, world, local = rank_from_env()
    path = Path(args.run) / "results" / f"rank{rank}.json"
    result: dict[str, Any] = {"rank": rank, "world_size": world, "status": "running", "started": time.time()}
    write_json(path, result)
    use_cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    try:
        if use_cuda:
            torch.cuda.set_device(local)
        result.update(device="cuda" if use_cuda else "cpu", versions=versions(torch, use_cuda))
        if world > 1:
            dist.init_process_group("nccl" if use_cuda else "gloo")
        session = argparse.Namespace(rank=rank, world=world, local=local, args=args, result=result,
                                     device=torch.device("cuda", local) if use_cuda else torch.device("cpu"),
                                     window=Window(args, rank, use_cuda, steps_per_epoch))
        yield session
        result.update(status="ok", step_times_ms=session.window.times, files=session.window.files)
        if world > 1:
            dist.barrier()
            dist.destroy_process_group()
    except BaseException as exc:
        result.update(status="failed", error=f"{type(exc).__name__}: {exc}")
        raise
    finally:
        result["finished"] = time.time()
        write_json(path, result)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m collectors.driver")
    ap.add_argument("--input", default=".")
    ap.add_argument("--run", required=True)
    ap.add_argument("--run-name", required=True)
    ap.add_argument("--profiler", default="none", choices=["none", "nsys", "ncu", "torch"])
    ap.add_argument("--profile-ranks", type=lambda s: [int(x) for x in s.split(",") if x], default=[0])
    ap.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"])
    ap.add_argument("--window-steps", type=int, default=5)
    ap.add_argument("--epochs", type=int, required=True)
    ap.add_argument("--batchsize", type=int, required=True)
    ap.add_argument("--cap-size", type=float, required=True)
    for name, default in (("wait", 1), ("warmup", 1), ("active", 3), ("repeat", 1), ("skip-first", 0)):
        ap.add_argument(f"--torch-{name}", type=int, default=default)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    rank = rank_from_env()[0]
    result: dict[str, Any] = {"rank": rank, "status": "running", "pid": os.getpid(), "started": time.time()}
    path = Path(args.run) / "results" / f"rank{rank}.json"
    write_json(path, result)
    try:
        train(args, result)
        result["status"] = "ok"
        return 0
    except BaseException as exc:  # noqa: BLE001 - recorded, then the rank exits non-zero
        result["status"] = "failed"
        result["error"] = f"{type(exc).__name__}: {exc}"
        traceback.print_exc()
        return 1
    finally:
        result["finished"] = time.time()
        write_json(path, result)


if __name__ == "__main__":
    sys.exit(main())
