"""A two-tower recommender: a user tower and an item tower, each summing bags of sparse ids through embedding
tables (``nn.EmbeddingBag``) into an MLP, scored by the dot product of the towers' outputs against every item
of the batch (in-batch softmax, the retrieval models' usual loss). Embedding-heavy: most of its parameters
(and of DDP's gradients) are the tables, most of its kernels small.

Shape on CUDA: 8 tables a tower of 100,000 rows x 64, bags of 20 ids, MLPs 512 -> 512 -> 256 -> 128, batch of
users and items from local_config. Without CUDA: 2 tables a tower of 1,000 rows x 16, bags of 4, MLPs to 16. Data:
random ids, 8 batches per epoch, ``((user_ids, item_ids), labels)``; labels: each user's item is its own row.
"""

from __future__ import annotations

import os
from typing import NamedTuple

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

BATCHES_PER_EPOCH = 8
TEMPERATURE = 0.05


class Shape(NamedTuple):
    tables: int = 8
    rows: int = 100_000
    dim: int = 64
    bag: int = 20
    hidden: tuple[int, ...] = (512, 256, 128)


def _shape() -> Shape:
    return Shape() if torch.cuda.is_available() else Shape(tables=2, rows=1000, dim=16, bag=4, hidden=(32, 16))


def _device(rank: int) -> torch.device:
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    return torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")


class Tower(nn.Module):
    def __init__(self, s: Shape) -> None:
        super().__init__()
        self.tables = nn.ModuleList(nn.EmbeddingBag(s.rows, s.dim, mode="sum") for _ in range(s.tables))
        layers: list[nn.Module] = []
        width = s.tables * s.dim
        for out in s.hidden:
            layers += [nn.Linear(width, out), nn.ReLU()]
            width = out
        self.mlp = nn.Sequential(*layers[:-1])

    def forward(self, ids: torch.Tensor) -> torch.Tensor:  # (batch, tables, bag)
        pooled = [table(ids[:, i]) for i, table in enumerate(self.tables)]
        return F.normalize(self.mlp(torch.cat(pooled, dim=1)), dim=1)


class TwoTower(nn.Module):
    def __init__(self, s: Shape) -> None:
        super().__init__()
        self.user, self.item = Tower(s), Tower(s)

    def forward(self, users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        return self.user(users) @ self.item(items).T / TEMPERATURE


def get_model(rank: int, cap_size: float) -> nn.Module:
    """The two towers on this rank's device; wrapped in DDP when a process group of more than one rank exists."""
    torch.manual_seed(0)
    device = _device(rank)
    model = TwoTower(_shape()).to(device)
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        ids = [device.index] if device.type == "cuda" else None
        model = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=cap_size, device_ids=ids)
    return model


def get_dataloader(rank: int, batchsize: int) -> list[tuple[tuple[torch.Tensor, torch.Tensor], torch.Tensor]]:
    """BATCHES_PER_EPOCH batches of random user and item id bags."""
    s = _shape()
    device = _device(rank)
    gen = torch.Generator().manual_seed(rank)
    batches = []
    for _ in range(BATCHES_PER_EPOCH):
        users = torch.randint(0, s.rows, (batchsize, s.tables, s.bag), generator=gen).to(device)
        items = torch.randint(0, s.rows, (batchsize, s.tables, s.bag), generator=gen).to(device)
        labels = torch.arange(batchsize, device=device)
        batches.append(((users, items), labels))
    return batches


def forward_pass(model: nn.Module, inputs: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """The in-batch softmax loss: each user's scores against every item of the batch, its own item the label."""
    users, items = inputs
    scores = model(users, items)
    return F.cross_entropy(scores, torch.arange(scores.shape[0], device=scores.device))


def backward_pass(output: torch.Tensor) -> None:
    """Backpropagate the scalar loss returned by ``forward_pass``."""
    output.backward()
