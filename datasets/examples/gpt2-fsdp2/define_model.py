"""The GPT-2 of ``../gpt2`` trained with FSDP2: each block, then the whole model, ``fully_shard``-ed over the
ranks (parameters sharded, all-gathered before each block's forward and backward, gradients reduce-scattered).

With one rank (the isolated run of the same shapes) the model is left whole: each rank of the sharded run
computes on the whole, all-gathered weights, so the single GPU runs the same kernels at the same shapes. Data,
loss and shapes are ``../gpt2``'s (GPT-2 small on CUDA, a tiny shape on CPU).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

_spec = importlib.util.spec_from_file_location("_gpt2_model", Path(__file__).resolve().parent.parent / "gpt2" /
                                               "define_model.py")
gpt2 = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(gpt2)  # type: ignore[union-attr]


def get_dataloader(rank: int, batchsize: int) -> list:
    """``../gpt2``'s batches of random tokens."""
    return gpt2.get_dataloader(rank, batchsize)


def forward_pass(model: nn.Module, inputs: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """``../gpt2``'s next-token loss."""
    return gpt2.forward_pass(model, inputs)


def backward_pass(output: torch.Tensor) -> None:
    output.backward()


def get_model(rank: int, cap_size: float) -> nn.Module:
    """GPT on this rank's device, each block and the root ``fully_shard``-ed when a process group of more than
    one rank exists (``cap_size``: DDP's bucket cap, not used: FSDP2 communicates a block at a time)."""
    torch.manual_seed(0)
    device = gpt2._device(rank)
    model = gpt2.GPT(gpt2._config()).to(device)
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh(device.type, (dist.get_world_size(),))
        for block in model.blocks:
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh)
    return model
