"""The smallest useful DDP example: a 3-layer MLP classifier (64 -> 512 -> 512 -> 10), for fast CPU tests.

About 300k parameters (1.2 MB of fp32 gradients), so ``bucket_cap_mb=1`` gives DDP more than one bucket.
Runs the same on CPU (gloo) and CUDA (nccl); nothing shrinks.

Data: random features and random class labels, 6 batches per epoch. Each batch is ``(inputs, labels)`` where
``inputs = (features, labels)`` carries the labels too. ``forward_pass`` returns the cross-entropy loss
(a scalar); ``backward_pass`` calls ``.backward()`` on it. The caller owns the optimizer.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

BATCHES_PER_EPOCH = 6
D_IN, HIDDEN, NUM_CLASSES = 64, 512, 10


def _device(rank: int) -> torch.device:
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    return torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")


def get_model(rank: int, cap_size: float) -> nn.Module:
    """MLP on this rank's device; wrapped in DDP when a process group of more than one rank exists."""
    torch.manual_seed(0)
    device = _device(rank)
    model = nn.Sequential(
        nn.Linear(D_IN, HIDDEN), nn.GELU(), nn.Linear(HIDDEN, HIDDEN), nn.GELU(), nn.Linear(HIDDEN, NUM_CLASSES)
    ).to(device)
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        ids = [device.index] if device.type == "cuda" else None
        model = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=cap_size, device_ids=ids)
    return model


def get_dataloader(rank: int, batchsize: int) -> list[tuple[tuple[torch.Tensor, torch.Tensor], torch.Tensor]]:
    """BATCHES_PER_EPOCH batches of random features: ``((features, labels), labels)``."""
    device = _device(rank)
    gen = torch.Generator().manual_seed(rank)
    batches = []
    for _ in range(BATCHES_PER_EPOCH):
        features = torch.randn(batchsize, D_IN, generator=gen).to(device)
        labels = torch.randint(0, NUM_CLASSES, (batchsize,), generator=gen).to(device)
        batches.append(((features, labels), labels))
    return batches


def forward_pass(model: nn.Module, inputs: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Logits for ``features`` and their cross-entropy against ``labels`` (a scalar loss)."""
    features, labels = inputs
    return F.cross_entropy(model(features), labels)


def backward_pass(output: torch.Tensor) -> None:
    """Backpropagate the scalar loss returned by ``forward_pass``."""
    output.backward()
