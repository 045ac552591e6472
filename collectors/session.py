"""What every rank sets up, whether our driver or a user's train_script.py runs it: its rank from the
launcher's environment, its device, the process group, the versions it ran with, and its result file."""

from __future__ import annotations

import os
import platform
from typing import Any

RANK_ENV = (("RANK", "WORLD_SIZE", "LOCAL_RANK"),
            ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
            ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"),
            ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"))


def rank_names() -> tuple[str, str, str] | None:
    """The (rank, world size, local rank) variables of the launcher that set a rank; None alone."""
    return next((names for names in RANK_ENV if names[0] in os.environ), None)


def rank_from_env() -> tuple[int, int, int]:
    """(rank, world_size, local_rank) from whichever launcher set them; (0, 1, 0) alone."""
    names = rank_names()
    if names is None:
        return 0, 1, 0
    rank, world, local = names
    return int(os.environ[rank]), int(os.environ.get(world, "1")), int(os.environ.get(local, "0"))


def versions(torch: Any, use_cuda: bool) -> dict[str, Any]:
    """Python, torch, CUDA (and NCCL, the GPU's name on CUDA) this rank runs with."""
    out = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda}
    if use_cuda:
        try:
            out["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        except Exception:  # noqa: BLE001 - a build without NCCL
            out["nccl"] = None
        out["gpu"] = torch.cuda.get_device_name()
    return out


def start(device: str, result: dict[str, Any]) -> tuple[bool, int, int, int]:
    """Set this rank up: its GPU (``device`` auto, cuda or cpu), the process group (NCCL on GPUs, gloo on
    CPUs) when there are several ranks; record it in ``result``. Returns (use_cuda, rank, world, local)."""
    import torch
    import torch.distributed as dist

    rank, world, local = rank_from_env()
    result.update(rank=rank, world_size=world, local_rank=local)
    use_cuda = device == "cuda" or (device == "auto" and torch.cuda.is_available())
    if use_cuda and not torch.cuda.is_available():
        raise RuntimeError("no GPU visible to this rank, but --device cuda (NCCL) was asked for")
    if use_cuda:
        torch.cuda.set_device(local)
    backend = "nccl" if use_cuda else "gloo"
    result.update(device="cuda" if use_cuda else "cpu", backend=backend, versions=versions(torch, use_cuda))
    if world > 1:
        dist.init_process_group(backend)
    return use_cuda, rank, world, local


def finish(world: int) -> None:
    """Wait for every rank, then leave the process group."""
    if world > 1:
        import torch.distributed as dist

        dist.barrier()
        dist.destroy_process_group()
