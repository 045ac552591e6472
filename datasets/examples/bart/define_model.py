"""BART (Hugging Face transformers' ``BartForConditionalGeneration``) with random weights, trained in bf16 autocast:
an encoder-decoder from a library, for profiling DDP training steps of a model this project did not write.

Shape on CUDA: BART-base (vocab 50265, d_model 768, 6 encoder and 6 decoder layers, 12 heads, FFN 3072), source
256 tokens, target 128. Without CUDA a tiny shape (vocab 1000, d_model 64, 2 + 2 layers, 4 heads, source 32,
target 16) and no autocast. Data: random token ids, 8 batches per epoch, ``((source, target), target)``; the loss
is the model's own (cross-entropy of the target, the decoder fed the target shifted right).
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
from torch import nn
from transformers import BartConfig, BartForConditionalGeneration

BATCHES_PER_EPOCH = 8


def _cuda() -> bool:
    return torch.cuda.is_available()


def _config() -> tuple[BartConfig, int, int]:
    if _cuda():
        cfg = BartConfig(vocab_size=50265, d_model=768, encoder_layers=6, decoder_layers=6,
                         encoder_attention_heads=12, decoder_attention_heads=12, encoder_ffn_dim=3072,
                         decoder_ffn_dim=3072, max_position_embeddings=512, dropout=0.1)
        return cfg, 256, 128
    cfg = BartConfig(vocab_size=1000, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                     decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, max_position_embeddings=64)
    return cfg, 32, 16


def _device(rank: int) -> torch.device:
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    return torch.device("cuda", local_rank) if _cuda() else torch.device("cpu")


def get_model(rank: int, cap_size: float) -> nn.Module:
    """BART on this rank's device; wrapped in DDP when a process group of more than one rank exists."""
    torch.manual_seed(0)
    device = _device(rank)
    model = BartForConditionalGeneration(_config()[0]).to(device)
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        ids = [device.index] if device.type == "cuda" else None
        model = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=cap_size, device_ids=ids)
    return model


def get_dataloader(rank: int, batchsize: int) -> list[tuple[tuple[torch.Tensor, torch.Tensor], torch.Tensor]]:
    """BATCHES_PER_EPOCH batches of random source and target token ids."""
    cfg, src, tgt = _config()
    device = _device(rank)
    gen = torch.Generator().manual_seed(rank)
    batches = []
    for _ in range(BATCHES_PER_EPOCH):
        source = torch.randint(3, cfg.vocab_size, (batchsize, src), generator=gen).to(device)
        target = torch.randint(3, cfg.vocab_size, (batchsize, tgt), generator=gen).to(device)
        batches.append(((source, target), target))
    return batches


def forward_pass(model: nn.Module, inputs: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """The model's loss on ``(source, target)`` (bf16 autocast on CUDA)."""
    source, target = inputs
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=_cuda()):
        return model(input_ids=source, labels=target).loss


def backward_pass(output: torch.Tensor) -> None:
    """Backpropagate the scalar loss returned by ``forward_pass``."""
    output.backward()
