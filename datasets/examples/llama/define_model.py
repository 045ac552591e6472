"""Llama-style decoder-only transformer with random weights, for profiling DDP training steps.

What makes it Llama-style: RMSNorm before attention and MLP, rotary position embeddings on queries and keys,
grouped-query attention (fewer key/value heads than query heads), a SwiGLU MLP, no biases, and an LM head
of its own (not tied to the embedding).

Shape on CUDA: vocab 32000, 8 layers, 16 query heads and 4 key/value heads of 64, d_model 1024, SwiGLU
hidden 2816, sequence 512 (156M parameters). Without CUDA: vocab 1000, 2 layers, 4 and 2 heads, d_model 128,
hidden 352, sequence 64. Data and loss as ``../gpt2``: random tokens, 8 batches per epoch, next-token
cross-entropy; the caller owns the optimizer.
"""

from __future__ import annotations

import os
from typing import NamedTuple

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

BATCHES_PER_EPOCH = 8


class LlamaConfig(NamedTuple):
    vocab: int = 32000
    n_layer: int = 8
    n_head: int = 16
    n_kv_head: int = 4
    d_model: int = 1024
    hidden: int = 2816
    seq: int = 512


def _config() -> LlamaConfig:
    if torch.cuda.is_available():
        return LlamaConfig()
    return LlamaConfig(vocab=1000, n_layer=2, n_head=4, n_kv_head=2, d_model=128, hidden=352, seq=64)


def _device(rank: int) -> torch.device:
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    return torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")


def _rotary(seq: int, head_dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the rotary angles, ``(seq, head_dim / 2)``."""
    freqs = 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim))
    angles = torch.outer(torch.arange(seq).float(), freqs)
    return angles.cos(), angles.sin()


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """``x`` (batch, heads, seq, head_dim) with each pair of its channels rotated by its position's angle."""
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)


class Attention(nn.Module):
    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.n_head, self.n_kv_head = cfg.n_head, cfg.n_kv_head
        self.head_dim = cfg.d_model // cfg.n_head
        self.q = nn.Linear(cfg.d_model, cfg.n_head * self.head_dim, bias=False)
        self.kv = nn.Linear(cfg.d_model, 2 * cfg.n_kv_head * self.head_dim, bias=False)
        self.o = nn.Linear(cfg.n_head * self.head_dim, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q = self.q(x).view(b, t, self.n_head, self.head_dim).transpose(1, 2)
        k, v = (z.view(b, t, self.n_kv_head, self.head_dim).transpose(1, 2) for z in self.kv(x).chunk(2, dim=-1))
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        repeat = self.n_head // self.n_kv_head  # grouped-query attention: each key/value head serves `repeat`
        k, v = k.repeat_interleave(repeat, dim=1), v.repeat_interleave(repeat, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o(y.transpose(1, 2).reshape(b, t, -1))


class Block(nn.Module):
    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.RMSNorm(cfg.d_model), nn.RMSNorm(cfg.d_model)
        self.attn = Attention(cfg)
        self.gate_up = nn.Linear(cfg.d_model, 2 * cfg.hidden, bias=False)
        self.down = nn.Linear(cfg.hidden, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), cos, sin)
        gate, up = self.gate_up(self.norm2(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)  # SwiGLU


class Llama(nn.Module):
    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.embed = nn.Embedding(cfg.vocab, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.norm = nn.RMSNorm(cfg.d_model)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab, bias=False)
        cos, sin = _rotary(cfg.seq, cfg.d_model // cfg.n_head)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        t = tokens.shape[1]
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, self.cos[:t], self.sin[:t])
        return self.lm_head(self.norm(x))


def get_model(rank: int, cap_size: float) -> nn.Module:
    """Llama on this rank's device; wrapped in DDP when a process group of more than one rank exists."""
    torch.manual_seed(0)
    device = _device(rank)
    model = Llama(_config()).to(device)
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
