"""BERT-style encoder with random weights and a masked-LM head, for profiling DDP training steps.

What makes it BERT-style: word + learned position + token type embeddings summed and LayerNormed, post-LN
encoder blocks (LayerNorm after each residual sum) with bidirectional attention (no causal mask) and a GELU
feed-forward, and an MLM head (dense + GELU + LayerNorm, then a decoder tied to the word embedding, with a
bias of its own). No dropout and no pooler.

Shape: BERT-base (vocab 30522, 12 layers, 12 heads, d_model 768, FFN 3072, sequence 512, 109.5M parameters)
when CUDA is available. Without CUDA it shrinks automatically to a tiny shape (vocab 1000, 2 layers, 4 heads,
d_model 128, FFN 512, sequence 64) so that a CPU step takes well under a second.

Data: random token ids, 8 batches per epoch. The first half of each sequence is segment A (token type 0), the
second half segment B (token type 1). In each sequence 15 % of the positions (at least one), chosen at random,
are replaced by ``[MASK]``; ``labels`` holds their original tokens there and -100 everywhere else. Each batch is
``(inputs, labels)`` where ``inputs = (tokens, labels)``. ``forward_pass`` returns the masked-LM cross-entropy
over the masked positions (a scalar); ``backward_pass`` calls ``.backward()`` on it. The caller owns the
optimizer.
"""

from __future__ import annotations

import os
from typing import NamedTuple

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

BATCHES_PER_EPOCH = 8
MASK_ID = 103  # BERT's [MASK] in its WordPiece vocabulary; below the CPU vocab too
MASK_FRACTION = 0.15
IGNORE_INDEX = -100


class BertConfig(NamedTuple):
    vocab: int = 30522
    n_layer: int = 12
    n_head: int = 12
    d_model: int = 768
    ffn: int = 3072
    seq: int = 512


def _config() -> BertConfig:
    if torch.cuda.is_available():
        return BertConfig()
    return BertConfig(vocab=1000, n_layer=2, n_head=4, d_model=128, ffn=512, seq=64)


def _device(rank: int) -> torch.device:
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    return torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")


class SelfAttention(nn.Module):
    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v)  # bidirectional: every position sees every other
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.attn = SelfAttention(cfg)
        self.ln1 = nn.LayerNorm(cfg.d_model, eps=1e-12)
        self.ffn = nn.Sequential(nn.Linear(cfg.d_model, cfg.ffn), nn.GELU(), nn.Linear(cfg.ffn, cfg.d_model))
        self.ln2 = nn.LayerNorm(cfg.d_model, eps=1e-12)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.ln1(x + self.attn(x))  # post-LN, as in BERT
        return self.ln2(x + self.ffn(x))


class Bert(nn.Module):
    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.word = nn.Embedding(cfg.vocab, cfg.d_model)
        self.position = nn.Embedding(cfg.seq, cfg.d_model)
        self.token_type = nn.Embedding(2, cfg.d_model)
        self.ln_embed = nn.LayerNorm(cfg.d_model, eps=1e-12)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        # MLM head: transform, then a decoder onto the vocabulary
        self.dense = nn.Linear(cfg.d_model, cfg.d_model)
        self.ln_head = nn.LayerNorm(cfg.d_model, eps=1e-12)
        self.decoder = nn.Linear(cfg.d_model, cfg.vocab)
        types = (torch.arange(cfg.seq) >= cfg.seq // 2).long()  # segment A, then segment B
        self.register_buffer("types", types, persistent=False)
        self.apply(self._init)
        self.decoder.weight = self.word.weight  # tied, as in BERT; the decoder's bias stays its own

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        t = tokens.shape[1]
        pos = torch.arange(t, device=tokens.device)
        x = self.ln_embed(self.word(tokens) + self.position(pos) + self.token_type(self.types[:t]))
        for block in self.blocks:
            x = block(x)
        return self.decoder(self.ln_head(F.gelu(self.dense(x))))


def get_model(rank: int, cap_size: float) -> nn.Module:
    """BERT on this rank's device; wrapped in DDP when a process group of more than one rank exists."""
    torch.manual_seed(0)
    device = _device(rank)
    model = Bert(_config()).to(device)
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        ids = [device.index] if device.type == "cuda" else None
        model = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=cap_size, device_ids=ids)
    return model


def get_dataloader(rank: int, batchsize: int) -> list[tuple[tuple[torch.Tensor, torch.Tensor], torch.Tensor]]:
    """BATCHES_PER_EPOCH batches of random tokens, 15 % of them masked: ``((tokens, labels), labels)``, labels
    the original tokens at the masked positions and -100 elsewhere."""
    cfg = _config()
    device = _device(rank)
    gen = torch.Generator().manual_seed(rank)
    n_masked = max(1, round(MASK_FRACTION * cfg.seq))
    batches = []
    for _ in range(BATCHES_PER_EPOCH):
        tokens = torch.randint(0, cfg.vocab, (batchsize, cfg.seq), generator=gen)
        masked = torch.rand(batchsize, cfg.seq, generator=gen).argsort(dim=1)[:, :n_masked]  # positions
        labels = torch.full_like(tokens, IGNORE_INDEX).scatter(1, masked, tokens.gather(1, masked))
        tokens = tokens.scatter(1, masked, MASK_ID)
        tokens, labels = tokens.to(device), labels.to(device)
        batches.append(((tokens, labels), labels))
    return batches


def forward_pass(model: nn.Module, inputs: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Logits for ``tokens`` and the masked-LM cross-entropy against ``labels`` (a scalar loss; positions
    labelled -100 do not count)."""
    tokens, labels = inputs
    logits = model(tokens)
    return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=IGNORE_INDEX)


def backward_pass(output: torch.Tensor) -> None:
    """Backpropagate the scalar loss returned by ``forward_pass``."""
    output.backward()
