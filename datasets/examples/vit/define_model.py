"""Vision Transformer (ViT) with random weights, for profiling DDP training steps.

What makes it a ViT: the image cut into square patches by a strided Conv2d (one linear embedding per patch),
a learned class token in front of the patch tokens, learned position embeddings, pre-LN encoder blocks with
bidirectional attention and a GELU MLP, a final LayerNorm, and a linear head on the class token.

Shape: ViT-B/16 (image 224, patch 16 so 196 patches + 1 class token, 12 layers, 12 heads, d_model 768, MLP
3072, 1000 classes, 86.6M parameters) when CUDA is available. Without CUDA it shrinks automatically to a tiny
shape (image 32, patch 8 so 16 patches + 1, 2 layers, 4 heads, d_model 128, MLP 512, 10 classes) so that a
CPU step takes well under a second.

Data: random normal images and random class labels, 8 batches per epoch. Each batch is ``(inputs, labels)``
where ``inputs = (images, labels)`` carries the labels too. ``forward_pass`` returns the cross-entropy loss
(a scalar); ``backward_pass`` calls ``.backward()`` on it. The caller owns the optimizer.
"""

from __future__ import annotations

import os
from typing import NamedTuple

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

BATCHES_PER_EPOCH = 8


class ViTConfig(NamedTuple):
    image: int = 224
    patch: int = 16
    n_layer: int = 12
    n_head: int = 12
    d_model: int = 768
    mlp: int = 3072
    classes: int = 1000


def _config() -> ViTConfig:
    if torch.cuda.is_available():
        return ViTConfig()
    return ViTConfig(image=32, patch=8, n_layer=2, n_head=4, d_model=128, mlp=512, classes=10)


def _device(rank: int) -> torch.device:
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    return torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")


class SelfAttention(nn.Module):
    def __init__(self, cfg: ViTConfig) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v)  # bidirectional: every token sees every other
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    def __init__(self, cfg: ViTConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model, eps=1e-6)
        self.attn = SelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(cfg.d_model, cfg.mlp), nn.GELU(), nn.Linear(cfg.mlp, cfg.d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))  # pre-LN
        return x + self.mlp(self.ln2(x))


class ViT(nn.Module):
    def __init__(self, cfg: ViTConfig) -> None:
        super().__init__()
        n_patches = (cfg.image // cfg.patch) ** 2
        self.patch_embed = nn.Conv2d(3, cfg.d_model, kernel_size=cfg.patch, stride=cfg.patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, cfg.d_model))
        self.pos_embed = nn.Parameter(torch.zeros(1, n_patches + 1, cfg.d_model))
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model, eps=1e-6)
        self.head = nn.Linear(cfg.d_model, cfg.classes)
        nn.init.normal_(self.cls_token, std=0.02)
        nn.init.normal_(self.pos_embed, std=0.02)
        self.apply(self._init)

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Conv2d)):
            nn.init.normal_(m.weight, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(images).flatten(2).transpose(1, 2)  # (batch, patches, d_model)
        x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1) + self.pos_embed
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x[:, 0]))  # the class token's


def get_model(rank: int, cap_size: float) -> nn.Module:
    """ViT on this rank's device; wrapped in DDP when a process group of more than one rank exists."""
    torch.manual_seed(0)
    device = _device(rank)
    model = ViT(_config()).to(device)
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        ids = [device.index] if device.type == "cuda" else None
        model = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=cap_size, device_ids=ids)
    return model


def get_dataloader(rank: int, batchsize: int) -> list[tuple[tuple[torch.Tensor, torch.Tensor], torch.Tensor]]:
    """BATCHES_PER_EPOCH batches of random images: ``((images, labels), labels)``."""
    cfg = _config()
    device = _device(rank)
    gen = torch.Generator().manual_seed(rank)
    batches = []
    for _ in range(BATCHES_PER_EPOCH):
        images = torch.randn(batchsize, 3, cfg.image, cfg.image, generator=gen).to(device)
        labels = torch.randint(0, cfg.classes, (batchsize,), generator=gen).to(device)
        batches.append(((images, labels), labels))
    return batches


def forward_pass(model: nn.Module, inputs: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Logits for ``images`` and their cross-entropy against ``labels`` (a scalar loss)."""
    images, labels = inputs
    return F.cross_entropy(model(images).float(), labels)


def backward_pass(output: torch.Tensor) -> None:
    """Backpropagate the scalar loss returned by ``forward_pass``."""
    output.backward()
