"""ResNet-50 (bottleneck blocks [3, 4, 6, 3], widths 64..2048, BatchNorm, 1000 classes) in pure torch.nn.

Random weights (Kaiming init). Images are 224x224 when CUDA is available; without CUDA they shrink
automatically to 32x32 so that a CPU step takes a few seconds at most. The architecture is unchanged.

Data: random images and random class labels, 8 batches per epoch. Each batch is ``(inputs, labels)`` where
``inputs = (images, labels)`` carries the labels too. ``forward_pass`` returns the cross-entropy loss
(a scalar); ``backward_pass`` calls ``.backward()`` on it. The caller owns the optimizer.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

BATCHES_PER_EPOCH = 8
NUM_CLASSES = 1000


def _image_size() -> int:
    return 224 if torch.cuda.is_available() else 32


def _device(rank: int) -> torch.device:
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    return torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")


def _conv_bn(cin: int, cout: int, k: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride, padding=k // 2, bias=False), nn.BatchNorm2d(cout))


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        cout = width * self.expansion
        self.conv1 = _conv_bn(cin, width, 1)
        self.conv2 = _conv_bn(width, width, 3, stride)
        self.conv3 = _conv_bn(width, cout, 1)
        nn.init.zeros_(self.conv3[1].weight)  # zero-init the last BN of each residual branch
        self.shortcut = _conv_bn(cin, cout, 1, stride) if stride != 1 or cin != cout else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.conv1(x))
        y = F.relu(self.conv2(y))
        return F.relu(self.conv3(y) + self.shortcut(x))


class ResNet50(nn.Module):
    def __init__(self, num_classes: int = NUM_CLASSES) -> None:
        super().__init__()
        self.stem = nn.Sequential(_conv_bn(3, 64, 7, 2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, padding=1))
        layers: list[nn.Module] = []
        cin = 64
        for i, (width, blocks) in enumerate(zip((64, 128, 256, 512), (3, 4, 6, 3), strict=True)):
            for j in range(blocks):
                layers.append(Bottleneck(cin, width, stride=2 if i > 0 and j == 0 else 1))
                cin = width * Bottleneck.expansion
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def get_model(rank: int, cap_size: float) -> nn.Module:
    """ResNet-50 on this rank's device; wrapped in DDP when a process group of more than one rank exists."""
    torch.manual_seed(0)
    device = _device(rank)
    model = ResNet50().to(device)
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        ids = [device.index] if device.type == "cuda" else None
        model = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=cap_size, device_ids=ids)
    return model


def get_dataloader(rank: int, batchsize: int) -> list[tuple[tuple[torch.Tensor, torch.Tensor], torch.Tensor]]:
    """BATCHES_PER_EPOCH batches of random images: ``((images, labels), labels)``."""
    device = _device(rank)
    size = _image_size()
    gen = torch.Generator().manual_seed(rank)
    batches = []
    for _ in range(BATCHES_PER_EPOCH):
        images = torch.randn(batchsize, 3, size, size, generator=gen).to(device)
        labels = torch.randint(0, NUM_CLASSES, (batchsize,), generator=gen).to(device)
        batches.append(((images, labels), labels))
    return batches


def forward_pass(model: nn.Module, inputs: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Logits for ``images`` and their cross-entropy against ``labels`` (a scalar loss)."""
    images, labels = inputs
    return F.cross_entropy(model(images), labels)


def backward_pass(output: torch.Tensor) -> None:
    """Backpropagate the scalar loss returned by ``forward_pass``."""
    output.backward()
