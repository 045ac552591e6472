"""The sequence-parallel benchmark's model, for tools that read the contract; train_script.py drives it.

The "model" is the MLP pair W1 (hidden x 4*hidden), W2 (4*hidden x hidden) of seqpar_config.json; a batch is
one sequence shard of this rank. train_script.py runs the benchmark with its own timing loop.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from torch import nn

CONFIG = json.loads((Path(__file__).parent / "seqpar_config.json").read_text())


def _device(rank: int) -> torch.device:
    local = int(os.environ.get("LOCAL_RANK", rank))
    return torch.device("cuda", local) if torch.cuda.is_available() else torch.device("cpu")


def get_model(rank: int, cap_size: float) -> nn.Module:
    torch.manual_seed(0)
    h = CONFIG["hidden"]
    return nn.Sequential(nn.Linear(h, 4 * h, bias=False), nn.Linear(4 * h, h, bias=False)).to(_device(rank))


def get_dataloader(rank: int, batchsize: int) -> list:
    gen = torch.Generator().manual_seed(rank)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    x = torch.randn(batchsize, CONFIG["seq_len"] // world, CONFIG["hidden"], generator=gen).to(_device(rank))
    return [(x, None) for _ in range(CONFIG["steps_per_epoch"])]


def forward_pass(model: nn.Module, inputs: torch.Tensor) -> torch.Tensor:
    return model(inputs)


def backward_pass(output: torch.Tensor) -> None:
    output.float().pow(2).mean().backward()
