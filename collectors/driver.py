"""The training driver one rank runs: build the model and data from define_model.py, train, profile a window.

    python -m traceql.collectors.driver --input DIR --run RUN_DIR --profiler nsys|ncu|torch|none [options]

Rank and world size come from the launcher's environment (torchrun's RANK/WORLD_SIZE/LOCAL_RANK, or
mpirun's OMPI_COMM_WORLD_*, PMI_*, SLURM_*). The profiled window is ``--steps`` steps in the middle of the
last epoch, between cudaProfilerStart/Stop, each step inside an NVTX range ``step_<i>``. The rank's result
(status, pid, versions, step times, files) is written to RUN_DIR/results/rank<R>.json, also when it fails:
then with the exception (``error``) and where it was raised (``error_at``: the innermost frame in the input
folder, the user's code, else the innermost frame anywhere).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import socket
import sys
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from traceql.collectors import session
from traceql.collectors.counterfactuals import defer_communication, rank_steps_ms, serial_step
from traceql.collectors.files import write_json
from traceql.collectors.window import Window


def load_module(path: Path, name: str = "define_model") -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None  # a .py path always has them
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look their module up here
    sys.path.insert(0, str(path.parent))
    spec.loader.exec_module(module)
    return module


@contextmanager
def communication_off(model: Any) -> Iterator[None]:
    """A DDP model's forward and backward with no communication: ``no_sync()`` (no gradient all-reduce) and
    no buffer broadcast in its forward; DDP's own flag is restored after, so the next step syncs as usual.
    Anything else runs as it is."""
    if not hasattr(model, "no_sync"):
        yield
        return
    saved = model.require_forward_param_sync
    model.require_forward_param_sync = False  # DDP broadcasts buffers in forward only when it is set
    try:
        with model.no_sync():
            yield
    finally:
        model.require_forward_param_sync = saved


def ddp_buckets(model: Any) -> list[int] | None:
    """The bytes of each DDP gradient bucket, in the order they are reduced (as DDP rebuilt them after its
    first step); None for a model that is not DDP."""
    if not hasattr(model, "_get_ddp_logging_data"):
        return None
    data = model._get_ddp_logging_data()
    sizes = str(data.get("rebuilt_bucket_sizes") or data.get("bucket_sizes") or "")
    return [int(x) for x in sizes.split(",") if x.strip()] or None


def forward_backward(window: Window, mod: Any, model: Any, inputs: Any) -> None:
    """The model's forward and backward (``define_model``'s passes), each a CPU section of the step."""
    with window.section("forward"):
        out = mod.forward_pass(model, inputs)
    with window.section("backward"):
        mod.backward_pass(out)


def train(args: argparse.Namespace, result: dict[str, Any]) -> None:
    import torch

    use_cuda, rank, world, _ = session.start(args.device, result)
    mod = load_module(Path(args.input) / "define_model.py")
    model = mod.get_model(rank, args.cap_size)
    loader = mod.get_dataloader(rank, args.batchsize)
    spe = len(loader) if hasattr(loader, "__len__") else None
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    serial = defer_communication(model, args.comm) if world > 1 else None
    window = Window(args, rank, use_cuda, spe)
    micro = args.accumulation_steps * args.virtual_workers
    if window.isolated_at and world > 1 and not hasattr(model, "no_sync"):  # FSDP, tensor parallelism
        window.isolated_at = set()
        result["note"] = ("no isolated steps: the model has no no_sync() (not DDP), so no step runs without "
                          "communication; collect its single-GPU twin (--set world_size=1) as the reference")
    result["window"] = {"epoch": window.epoch, "start": window.start, "steps": window.count, "steps_per_epoch": spe,
                        "profiled": window.profiled, "isolated_before": sorted(window.isolated_at)}
    for epoch in range(args.epochs):
        for index, (inputs, _labels) in enumerate(loader):  # the contract: (inputs, labels) pairs
            if window.isolated_before(epoch, index):
                with window.isolated(epoch, index), communication_off(model):
                    forward_backward(window, mod, model, inputs)
                    opt.zero_grad(set_to_none=True)  # the gradients are dropped: no optimizer step
            if serial is not None:
                serial.deferring = serial_step(args.comm, index)
            with window.step(epoch, index):
                for m in range(micro):  # the gradients of all, DDP's all-reduce in the last only
                    with communication_off(model) if m < micro - 1 else nullcontext():
                        forward_backward(window, mod, model, inputs)
                        if serial is not None:  # comm=serial: the buckets all-reduced after the backward
                            with window.section("all-reduce"):
                                serial.flush()
                window.after_backward(epoch, index)
                with window.section("optimizer"):
                    opt.step()
                    opt.zero_grad(set_to_none=True)
            if args.comm == "alternate" and serial is not None:  # which steps were the serialized ones
                window.times[-1]["serial"] = serial.deferring
    result["step_times_ms"] = window.times
    result["ddp_buckets"] = ddp_buckets(model)
    # each trained parameter's gradient bytes, in registration order: what DDP packs into buckets at any cap
    result["param_bytes"] = [p.numel() * p.element_size() for p in model.parameters() if p.requires_grad]
    result["comm"] = args.comm if serial is not None else "overlap"
    if window.delay is not None:
        result["gpu_delay"] = window.delay.record()
    result["files"] = window.files
    session.finish(world)


def _result_path(args: argparse.Namespace) -> Path:
    return Path(args.run) / "results" / f"rank{session.rank_from_env()[0]}.json"


def _started() -> dict[str, Any]:
    """A rank's result while it runs: what stops it from outside (pid, host) is known from the start."""
    return {"rank": session.rank_from_env()[0], "status": "running", "pid": os.getpid(),
            "host": socket.gethostname(), "started": time.time()}


def raised_at(exc: BaseException, input_dir: str | Path) -> dict[str, Any] | None:
    """Where ``exc`` was raised: the innermost traceback frame inside ``input_dir`` (the user's code), its
    file relative to that folder; else the innermost frame anywhere (a library path shortened to the part
    after site-packages). None without a traceback."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return None
    root = Path(input_dir).resolve()
    for frame in reversed(frames):
        try:
            rel = Path(frame.filename).resolve().relative_to(root)
        except (ValueError, OSError):
            continue
        return {"file": str(rel), "line": frame.lineno, "function": frame.name, "in_input": True}
    frame = frames[-1]
    name = frame.filename
    for marker in ("site-packages/", "dist-packages/"):
        if marker in name:
            name = name.rsplit(marker, 1)[1]
            break
    return {"file": name, "line": frame.lineno, "function": frame.name, "in_input": False}


def record_failure(result: dict[str, Any], exc: BaseException, input_dir: str | Path) -> None:
    """Mark ``result`` failed with the exception and where in the user's code it was raised."""
    text = str(exc)
    result.update(status="failed", error=f"{type(exc).__name__}: {text}" if text else type(exc).__name__,
                  error_at=raised_at(exc, input_dir))


@contextmanager
def script_session(steps_per_epoch: int | None = None) -> Iterator[argparse.Namespace]:
    """For a train_script.py: the rank, device, process group, profiled window and result file of a run.

    The launcher's settings arrive as TRACEQL_DRIVER_ARGS (the driver's own command line)::

        from traceql.collectors.driver import script_session
        with script_session() as s:             # s.rank, s.world, s.device, s.args, s.window, s.result
            for epoch in range(s.args.epochs):
                for i in range(steps):
                    with s.window.step(epoch, i):
                        ...
    """
    import torch

    args = parse(json.loads(os.environ.get("TRACEQL_DRIVER_ARGS", "[]")) or None)
    path = _result_path(args)
    result = _started()
    write_json(path, result)
    try:
        use_cuda, rank, world, local = session.start(args.device, result)
        s = argparse.Namespace(rank=rank, world=world, local=local, args=args, result=result,
                               device=torch.device("cuda", local) if use_cuda else torch.device("cpu"),
                               window=Window(args, rank, use_cuda, steps_per_epoch))
        yield s
        result.update(status="ok", step_times_ms=s.window.times, files=s.window.files)
        session.finish(world)
    except BaseException as exc:
        record_failure(result, exc, args.input)
        raise
    finally:
        result["finished"] = time.time()
        write_json(path, result)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m traceql.collectors.driver")
    ap.add_argument("--input", default=".")
    ap.add_argument("--run", required=True)
    ap.add_argument("--run-name", required=True)
    ap.add_argument("--profiler", default="none", choices=["none", "nsys", "ncu", "torch"])
    ap.add_argument("--profile-ranks", type=lambda s: [int(x) for x in s.split(",") if x], default=[0])
    ap.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"])
    ap.add_argument("--window-steps", type=int, default=5)
    ap.add_argument("--isolated-steps", type=int, default=0)
    ap.add_argument("--epochs", type=int, required=True)
    ap.add_argument("--batchsize", type=int, required=True)
    ap.add_argument("--cap-size", type=float, required=True)
    ap.add_argument("--accumulation-steps", type=int, default=1)
    ap.add_argument("--virtual-workers", type=int, default=1)
    ap.add_argument("--straggler", type=rank_steps_ms, default=None,
                    help="RANK:STEPS:MS: rank RANK sleeps MS ms at the start of window steps STEPS (1,3)")
    ap.add_argument("--straggler-at", default="start", choices=["start", "backward"],
                    help="where in the step the straggler sleeps: at its start, or after its backward")
    ap.add_argument("--gpu-delay", type=rank_steps_ms, default=None,
                    help="RANK:STEPS:MS: rank RANK's GPU spins MS ms at the start of window steps STEPS")
    ap.add_argument("--comm", default="overlap", choices=["overlap", "serial", "alternate"],
                    help="serial: DDP's all-reduces deferred until the backward ends; alternate: in odd steps")
    for name, default in (("wait", 1), ("warmup", 1), ("active", 3), ("repeat", 1), ("skip-first", 0)):
        ap.add_argument(f"--torch-{name}", type=int, default=default)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    path = _result_path(args)
    result = _started()
    write_json(path, result)
    try:
        train(args, result)
        result["status"] = "ok"
        return 0
    except BaseException as exc:  # noqa: BLE001 - recorded, then the rank exits non-zero
        record_failure(result, exc, args.input)
        traceback.print_exc()
        return 1
    finally:
        result["finished"] = time.time()
        write_json(path, result)


if __name__ == "__main__":
    sys.exit(main())
