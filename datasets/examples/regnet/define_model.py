"""RegNetY-400MF (torchvision's ``regnet_y_400mf``) with random weights: a vision model from a library, many
small kernels (grouped convolutions, squeeze-and-excitation), for profiling DDP training steps of a model this
project did not write.

Shape on CUDA: 224x224 images, 1000 classes. Without CUDA 32x32 images and 10 classes. Data: random images and
labels, 8 batches per epoch, ``((images, labels), labels)``; the loss is the cross-entropy of the logits.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torchvision.models import regnet_y_400mf

BATCHES_PER_EPOCH = 8


def _shape() -> tuple[int, int]:
    return (224, 1000) if torch.cuda.is_available() else (32, 10)


def _device(rank: int) -> torch.device:
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    return torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")


def get_model(rank: int, cap_size: float) -> nn.Module:
    """EfficientNet-B0 on this rank's device; wrapped in DDP when a process group of more than one rank exists."""
    torch.manual_seed(0)
    device = _device(rank)
    model = regnet_y_400mf(weights=None, num_classes=_shape()[1]).to(device)
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        ids = [device.index] if device.type == "cuda" else None
        model = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=cap_size, device_ids=ids)
    return model


def get_dataloader(rank: int, batchsize: int) -> list[tuple[tuple[torch.Tensor, torch.Tensor], torch.Tensor]]:
    """BATCHES_PER_EPOCH batches of random images and labels."""
    size, classes = _shape()
    device = _device(rank)
    gen = torch.Generator().manual_seed(rank)
    batches = []
    for _ in range(BATCHES_PER_EPOCH):
        images = torch.randn(batchsize, 3, size, size, generator=gen).to(device)
        labels = torch.randint(0, classes, (batchsize,), generator=gen).to(device)
        batches.append(((images, labels), labels))
    return batches


def forward_pass(model: nn.Module, inputs: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """The cross-entropy of the model's logits for ``images`` against ``labels``."""
    images, labels = inputs
    return F.cross_entropy(model(images), labels)


def backward_pass(output: torch.Tensor) -> None:
    """Backpropagate the scalar loss returned by ``forward_pass``."""
    output.backward()
