"""A Qwen2-MoE decoder (Hugging Face transformers' ``Qwen2MoeForCausalLM``) with random weights, trained in bf16
autocast: a mixture of experts from a library (each token routed to 2 of 8 experts, beside a shared expert),
for profiling DDP training steps of a model this project did not write.

Shape on CUDA: vocab 32000, hidden 768, 8 layers, 12 query and 4 key/value heads, 8 experts of 768 (top 2) and a
shared expert of 1536, sequence 512. Without CUDA a tiny shape (vocab 1000, hidden 64, 2 layers, 4 experts of
64, sequence 32) and no autocast. Data: random token ids, 8 batches per epoch, ``((tokens, tokens), tokens)``;
the loss is the model's own next-token cross-entropy.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
from torch import nn
from transformers import Qwen2MoeConfig, Qwen2MoeForCausalLM

BATCHES_PER_EPOCH = 8


def _cuda() -> bool:
    return torch.cuda.is_available()


def _config() -> tuple[Qwen2MoeConfig, int]:
    if _cuda():
        cfg = Qwen2MoeConfig(vocab_size=32000, hidden_size=768, num_hidden_layers=8, num_attention_heads=12,
                             num_key_value_heads=4, intermediate_size=2048, moe_intermediate_size=768,
                             shared_expert_intermediate_size=1536, num_experts=8, num_experts_per_tok=2,
                             decoder_sparse_step=1, max_position_embeddings=1024, output_router_logits=False)
        return cfg, 512
    cfg = Qwen2MoeConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, intermediate_size=128, moe_intermediate_size=64,
                         shared_expert_intermediate_size=128, num_experts=4, num_experts_per_tok=2,
                         decoder_sparse_step=1, max_position_embeddings=64, output_router_logits=False)
    return cfg, 32


def _device(rank: int) -> torch.device:
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    return torch.device("cuda", local_rank) if _cuda() else torch.device("cpu")


def get_model(rank: int, cap_size: float) -> nn.Module:
    """The MoE decoder on this rank's device; wrapped in DDP when a process group of more than one rank exists
    (every expert gets tokens in every step of this data: no unused parameters)."""
    torch.manual_seed(0)
    device = _device(rank)
    model = Qwen2MoeForCausalLM(_config()[0]).to(device)
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        ids = [device.index] if device.type == "cuda" else None
        model = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=cap_size, device_ids=ids)
    return model


def get_dataloader(rank: int, batchsize: int) -> list[tuple[tuple[torch.Tensor, torch.Tensor], torch.Tensor]]:
    """BATCHES_PER_EPOCH batches of random token ids."""
    cfg, seq = _config()
    device = _device(rank)
    gen = torch.Generator().manual_seed(rank)
    batches = []
    for _ in range(BATCHES_PER_EPOCH):
        tokens = torch.randint(0, cfg.vocab_size, (batchsize, seq), generator=gen).to(device)
        batches.append(((tokens, tokens), tokens))
    return batches


def forward_pass(model: nn.Module, inputs: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """The model's next-token loss on ``tokens`` (bf16 autocast on CUDA)."""
    tokens, labels = inputs
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=_cuda()):
        return model(input_ids=tokens, labels=labels).loss


def backward_pass(output: torch.Tensor) -> None:
    """Backpropagate the scalar loss returned by ``forward_pass``."""
    output.backward()
