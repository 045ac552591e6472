"""Transformer blocks (attention and MLP) trained with tensor parallelism (DTensor, Megatron-style): the query,
key, value and MLP-up projections split by columns, the attention output and MLP-down projections by rows, so
each rank holds ``1 / tp_degree`` of the heads and of the MLP and the blocks' outputs are all-reduced.

Shapes (``tp_config.json``): 4 blocks, hidden 2048, 16 heads, sequence 1024 on CUDA; 2 blocks, hidden 128, 4 heads,
sequence 32 on CPU. Every rank reads the same batch (tensor parallelism splits the model, not the data). With
one rank (the isolated run of the same shapes) the blocks are built at one rank's shard of them
(``tp_degree`` from ``tp_config.json``): the same kernels at the same shapes, without the all-reduces.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

CONFIG = json.loads((Path(__file__).parent / "tp_config.json").read_text())


def _device(rank: int) -> torch.device:
    local = int(os.environ.get("LOCAL_RANK", rank))
    return torch.device("cuda", local) if torch.cuda.is_available() else torch.device("cpu")


def _shape() -> dict:
    return CONFIG["cuda" if torch.cuda.is_available() else "cpu"]


class Block(nn.Module):
    """Pre-LN attention and MLP; ``split`` divides the heads and the MLP's width (one rank's shard)."""

    def __init__(self, hidden: int, heads: int, split: int = 1) -> None:
        super().__init__()
        self.head_dim = hidden // heads
        width = hidden // split
        self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.q, self.k, self.v = (nn.Linear(hidden, width, bias=False) for _ in range(3))
        self.o = nn.Linear(width, hidden, bias=False)
        self.up = nn.Linear(hidden, 4 * hidden // split, bias=False)
        self.down = nn.Linear(4 * hidden // split, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        h = self.ln1(x)
        q, k, v = (p(h).view(b, t, -1, self.head_dim).transpose(1, 2) for p in (self.q, self.k, self.v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, -1)
        x = x + self.o(y)
        return x + self.down(F.gelu(self.up(self.ln2(x)), approximate="tanh"))


def _replicate(module: nn.Module, inputs: tuple, mesh) -> tuple:
    from torch.distributed.tensor import DTensor, Replicate

    return tuple(DTensor.from_local(t, mesh, [Replicate()]) for t in inputs)


def _local(module: nn.Module, output, mesh) -> torch.Tensor:
    return output.to_local()


def get_model(rank: int, cap_size: float) -> nn.Module:
    """The blocks on this rank's device, tensor-parallel over the ranks when a process group of more than one
    rank exists, else at one rank's shard (``cap_size`` is DDP's and not used)."""
    torch.manual_seed(0)
    shape, device = _shape(), _device(rank)
    world = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
    split = 1 if world > 1 else CONFIG["tp_degree"]
    model = nn.Sequential(*(Block(shape["hidden"], shape["heads"], split) for _ in range(shape["layers"])))
    model = model.to(device)
    if world > 1:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import distribute_module
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

        mesh = init_device_mesh(device.type, (world,))
        plan = {"q": ColwiseParallel(), "k": ColwiseParallel(), "v": ColwiseParallel(), "o": RowwiseParallel(),
                "up": ColwiseParallel(), "down": RowwiseParallel()}
        for block in model:
            parallelize_module(block, mesh, plan)
            for norm in (block.ln1, block.ln2):  # replicated, so every parameter is a DTensor
                distribute_module(norm, mesh, input_fn=_replicate, output_fn=_local)
    return model


def get_dataloader(rank: int, batchsize: int) -> list[tuple[torch.Tensor, None]]:
    """The same random batches on every rank."""
    shape = _shape()
    gen = torch.Generator().manual_seed(0)
    return [(torch.randn(batchsize, shape["seq"], shape["hidden"], generator=gen).to(_device(rank)), None)
            for _ in range(CONFIG["steps_per_epoch"])]


def forward_pass(model: nn.Module, inputs: torch.Tensor) -> torch.Tensor:
    return model(inputs).float().pow(2).mean()


def backward_pass(output: torch.Tensor) -> None:
    output.backward()
