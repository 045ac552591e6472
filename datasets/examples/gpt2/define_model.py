"""GPT-2-style decoder-only transformer with random weights, for profiling DDP training steps.

Shape: GPT-2 small (vocab 50257, 12 layers, 12 heads, d_model 768, sequence 512) when CUDA is available.
Without CUDA it shrinks automatically to a tiny shape (vocab 1000, 2 layers, 4 heads, d_model 128,
sequence 64) so that a CPU step takes well under a second.

Data: random token ids, 8 batches per epoch. Each batch is ``(inputs, labels)`` where
``inputs = (tokens, targets)`` carries the next-token targets and ``labels`` is the same ``targets`` tensor.
``forward_pass`` returns the cross-entropy loss over the vocabulary (a scalar); ``backward_pass`` calls
``.backward()`` on it. The caller owns the optimizer.
"""

from __future__ import annotations

import os
from typing import NamedTuple

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

BATCHES_PER_EPOCH = 8


class GPTConfig(NamedTuple):
    vocab: int = 50257
    n_layer: int = 12
    n_head: int = 12
    d_model: int = 768
    seq: int = 512


def _config() -> GPTConfig:
    if torch.cuda.is_available():
        return GPTConfig()
    return GPTConfig(vocab=1000, n_layer=2, n_head=4, d_model=128, seq=64)


def _device(rank: int) -> torch.device:
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    return torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        d = cfg.d_model
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.wte = nn.Embedding(cfg.vocab, cfg.d_model)
        self.wpe = nn.Embedding(cfg.seq, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab, bias=False)
        self.apply(self._init)
        self.lm_head.weight = self.wte.weight  # tied, as in GPT-2

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.wte(tokens) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def get_model(rank: int, cap_size: float) -> nn.Module:
    """GPT on this rank's device; wrapped in DDP when a process group of more than one rank exists."""
    torch.manual_seed(0)
    device = _device(rank)
    model = GPT(_config()).to(device)
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        ids = [device.index] if device.type == "cuda" else None
        model = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=cap_size, device_ids=ids)
    return model


def get_dataloader(rank: int, batchsize: int) -> list[tuple[tuple[torch.Tensor, torch.Tensor], torch.Tensor]]:
    """BATCHES_PER_EPOCH batches of random tokens: ``((tokens, targets), targets)``, targets = tokens shifted by one."""
    cfg = _config()
    device = _device(rank)
    gen = torch.Generator().manual_seed(rank)
    batches = []
    for _ in range(BATCHES_PER_EPOCH):
        seq = torch.randint(0, cfg.vocab, (batchsize, cfg.seq + 1), generator=gen).to(device)
        tokens, targets = seq[:, :-1].contiguous(), seq[:, 1:].contiguous()
        batches.append(((tokens, targets), targets))
    return batches


def forward_pass(model: nn.Module, inputs: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Logits for ``tokens`` and the next-token cross-entropy against ``targets`` (a scalar loss)."""
    tokens, targets = inputs
    logits = model(tokens)
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


def backward_pass(output: torch.Tensor) -> None:
    """Backpropagate the scalar loss returned by ``forward_pass``."""
    output.backward()
