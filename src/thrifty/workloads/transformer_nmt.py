# SPDX-License-Identifier: MIT
"""Encoder-decoder Transformers (Vaswani et al., NeurIPS 2017) as two published benchmarks train them.

- `FairseqTransformer`: fairseq's `transformer_wmt_en_de_big_t2t` as NVIDIA DeepLearningExamples
  (PyTorch/Translation/Transformer) trains it on WMT14 en-de: 6+6 pre-norm layers (the t2t
  variant), d_model 1024, FFN 4096, 16 heads, ReLU, dropout 0.1 (DLE's scripts override the
  arch's 0.3) on residuals, attention and ReLU, sinusoidal positions, one embedding shared by
  encoder, decoder and output projection (--share-all-embeddings), vocabulary 33712 (DLE's
  run_preprocessing.sh: joined dictionary, --nwordssrc/--nwordstgt 33712, a multiple of 8),
  label-smoothed (0.1) cross-entropy, Adam. Attention as fairseq's MultiheadAttention: packed
  q/k/v projection, explicit bmm-softmax-bmm.
- `JadoreTransformer`: the Transformer of github.com/jadore801120/attention-is-all-you-need-pytorch
  (2018-19 code, which Gavel's workloads/pytorch/translation copies) on Multi30k: 6+6 post-norm
  layers, d_model 512, 8 heads of 64, FFN 2048 as a pair of kernel-1 Conv1d, q/k/v projections
  with bias, frozen sinusoidal position table (max length 50 + 2), padding masks multiplied in
  after each sub-layer, output projection tied to the target embedding (-proj_share_weight),
  summed cross-entropy, Adam. Vocabularies of Multi30k with the default min count 5: about 3,200
  (en) and 3,700 (de) words, an estimate (the output layer is ~4% of the work).
"""

import math

import torch
import torch.nn.functional as F
from torch import nn


def sinusoid_table(positions: int, dim: int) -> torch.Tensor:  # Vaswani et al. section 3.5
    pos = torch.arange(positions, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    return torch.cat([torch.sin(pos * freq), torch.cos(pos * freq)], dim=1)


class FairseqAttention(nn.Module):  # fairseq modules/multihead_attention.py (2019): packed in_proj
    def __init__(self, dim: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.in_proj, self.out_proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None, mask=None) -> torch.Tensor:
        b, t, d = x.shape
        if memory is None:  # self-attention: one projection for q, k, v
            q, k, v = self.in_proj(x).chunk(3, dim=-1)
        else:  # encoder-decoder attention: q from the decoder, k and v from the encoder output
            w, bias = self.in_proj.weight, self.in_proj.bias
            q = F.linear(x, w[:d], bias[:d])
            k, v = F.linear(memory, w[d:], bias[d:]).chunk(2, dim=-1)
        split = lambda z: z.reshape(b, -1, self.heads, d // self.heads).transpose(1, 2)  # noqa: E731
        scores = (split(q) * (d // self.heads) ** -0.5) @ split(k).transpose(-1, -2)
        if mask is not None:
            scores = scores + mask
        probs = F.dropout(scores.softmax(dim=-1), self.dropout, self.training)
        return self.out_proj((probs @ split(v)).transpose(1, 2).reshape(b, t, d))


class PreNormLayer(nn.Module):  # fairseq TransformerEncoderLayer / DecoderLayer, normalize_before
    def __init__(self, dim: int, heads: int, ffn: int, dropout: float, cross: bool) -> None:
        super().__init__()
        self.dropout = dropout
        self.self_norm, self.self_attn = nn.LayerNorm(dim), FairseqAttention(dim, heads, dropout)
        self.cross_norm = nn.LayerNorm(dim) if cross else None
        self.cross_attn = FairseqAttention(dim, heads, dropout) if cross else None
        self.ffn_norm, self.fc1, self.fc2 = nn.LayerNorm(dim), nn.Linear(dim, ffn), nn.Linear(ffn, dim)

    def forward(self, x, memory=None, mask=None):
        drop = lambda z: F.dropout(z, self.dropout, self.training)  # noqa: E731
        x = x + drop(self.self_attn(self.self_norm(x), mask=mask))
        if self.cross_attn is not None and self.cross_norm is not None:  # both or neither (`cross`)
            x = x + drop(self.cross_attn(self.cross_norm(x), memory))
        return x + drop(self.fc2(drop(F.relu(self.fc1(self.ffn_norm(x))))))


class FairseqTransformer(nn.Module):  # fairseq transformer_wmt_en_de_big_t2t, --share-all-embeddings
    positions: torch.Tensor  # buffers (register_buffer)
    future_mask: torch.Tensor

    def __init__(self, vocab: int = 33712, dim: int = 1024, heads: int = 16, ffn: int = 4096,
                 layers: int = 6, dropout: float = 0.1, max_positions: int = 1024) -> None:
        super().__init__()
        self.dim, self.dropout = dim, dropout
        self.embed = nn.Embedding(vocab, dim, padding_idx=1)
        nn.init.normal_(self.embed.weight, std=dim ** -0.5)  # fairseq transformer.py Embedding()
        self.register_buffer("positions", sinusoid_table(max_positions, dim), persistent=False)
        self.register_buffer("future_mask", torch.full((max_positions, max_positions), float("-inf")).triu(1),
                             persistent=False)  # fairseq caches it (buffered_future_mask)
        self.encoder = nn.ModuleList(PreNormLayer(dim, heads, ffn, dropout, False) for _ in range(layers))
        self.decoder = nn.ModuleList(PreNormLayer(dim, heads, ffn, dropout, True) for _ in range(layers))
        self.encoder_norm, self.decoder_norm = nn.LayerNorm(dim), nn.LayerNorm(dim)

    def _embed(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) * math.sqrt(self.dim) + self.positions[:tokens.shape[1]]
        return F.dropout(x, self.dropout, self.training)

    def forward(self, src: torch.Tensor, prev_tgt: torch.Tensor) -> torch.Tensor:
        memory = self._embed(src)
        for layer in self.encoder:
            memory = layer(memory)
        memory, x = self.encoder_norm(memory), self._embed(prev_tgt)
        t = prev_tgt.shape[1]
        for layer in self.decoder:
            x = layer(x, memory, self.future_mask[:t, :t])
        return F.linear(self.decoder_norm(x), self.embed.weight)  # output projection = shared embedding


def fairseq_batch(b: int, device, src_len: int, tgt_len: int) -> tuple:
    """((src, prev_output_tokens), target) of b sentence pairs; token ids are arbitrary: counting needs only shapes."""
    long = dict(dtype=torch.long, device=device)
    return (torch.full((b, src_len), 4, **long), torch.full((b, tgt_len), 4, **long)), \
        torch.full((b, tgt_len), 4, **long)


def label_smoothed_loss(logits, target) -> torch.Tensor:  # fairseq label_smoothed_cross_entropy, eps 0.1
    return F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=1, label_smoothing=0.1)


class JadoreAttention(nn.Module):  # jadore801120 transformer/SubLayers.py MultiHeadAttention (post-norm)
    def __init__(self, dim: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads = heads
        self.w_qs, self.w_ks, self.w_vs = (nn.Linear(dim, dim) for _ in range(3))
        self.fc, self.norm, self.dropout = nn.Linear(dim, dim), nn.LayerNorm(dim), nn.Dropout(dropout)

    def forward(self, q_in, kv_in, mask):  # mask: True where attention is not allowed, (b, tq, tk)
        (b, tq, d), tk, h = q_in.shape, kv_in.shape[1], self.heads

        def split(z, n):  # (b, n, h*dk) -> (h*b, n, dk), as the source lays heads out
            return z.view(b, n, h, d // h).permute(2, 0, 1, 3).contiguous().view(-1, n, d // h)
        q, k, v = split(self.w_qs(q_in), tq), split(self.w_ks(kv_in), tk), split(self.w_vs(kv_in), tk)
        scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(d // h)
        probs = self.dropout(scores.masked_fill(mask.repeat(h, 1, 1), float("-inf")).softmax(dim=2))
        out = torch.bmm(probs, v).view(h, b, tq, d // h).permute(1, 2, 0, 3).contiguous().view(b, tq, d)
        return self.norm(self.dropout(self.fc(out)) + q_in)


class JadoreFeedForward(nn.Module):  # SubLayers.py PositionwiseFeedForward: two kernel-1 Conv1d
    def __init__(self, dim: int, ffn: int, dropout: float) -> None:
        super().__init__()
        self.w_1, self.w_2 = nn.Conv1d(dim, ffn, 1), nn.Conv1d(ffn, dim, 1)
        self.norm, self.dropout = nn.LayerNorm(dim), nn.Dropout(dropout)

    def forward(self, x):
        out = self.w_2(F.relu(self.w_1(x.transpose(1, 2)))).transpose(1, 2)
        return self.norm(self.dropout(out) + x)


class JadoreLayer(nn.Module):  # Layers.py EncoderLayer / DecoderLayer (outputs *= non_pad_mask)
    def __init__(self, dim: int, heads: int, ffn: int, dropout: float, cross: bool) -> None:
        super().__init__()
        self.self_attn = JadoreAttention(dim, heads, dropout)
        self.cross_attn = JadoreAttention(dim, heads, dropout) if cross else None
        self.ffn = JadoreFeedForward(dim, ffn, dropout)

    def forward(self, x, non_pad, self_mask, memory=None, cross_mask=None):
        x = self.self_attn(x, x, self_mask) * non_pad
        if self.cross_attn is not None:
            x = self.cross_attn(x, memory, cross_mask) * non_pad
        return self.ffn(x) * non_pad


class JadoreTransformer(nn.Module):  # jadore801120 transformer/Models.py Transformer, -proj_share_weight
    def __init__(self, src_vocab: int = 3200, tgt_vocab: int = 3700, max_len: int = 52, dim: int = 512,
                 heads: int = 8, ffn: int = 2048, layers: int = 6, dropout: float = 0.1) -> None:
        super().__init__()
        self.src_emb = nn.Embedding(src_vocab, dim, padding_idx=0)
        self.tgt_emb = nn.Embedding(tgt_vocab, dim, padding_idx=0)
        self.src_pos = nn.Embedding.from_pretrained(sinusoid_table(max_len + 1, dim), freeze=True)
        self.tgt_pos = nn.Embedding.from_pretrained(sinusoid_table(max_len + 1, dim), freeze=True)
        self.encoder = nn.ModuleList(JadoreLayer(dim, heads, ffn, dropout, False) for _ in range(layers))
        self.decoder = nn.ModuleList(JadoreLayer(dim, heads, ffn, dropout, True) for _ in range(layers))
        self.proj = nn.Linear(dim, tgt_vocab, bias=False)
        self.proj.weight = self.tgt_emb.weight
        self.logit_scale = dim ** -0.5

    def forward(self, src, src_pos, tgt, tgt_pos):
        t = tgt.shape[1]
        src_pad, tgt_pad = src.eq(0)[:, None, :], tgt.eq(0)[:, None, :]
        x = self.src_emb(src) + self.src_pos(src_pos)
        non_pad = src.ne(0).float()[..., None]
        for layer in self.encoder:
            x = layer(x, non_pad, src_pad.expand(-1, src.shape[1], -1))
        memory, y = x, self.tgt_emb(tgt) + self.tgt_pos(tgt_pos)
        causal = torch.triu(torch.ones(t, t, dtype=torch.uint8, device=tgt.device), diagonal=1)[None]
        self_mask = (tgt_pad.expand(-1, t, -1).to(torch.uint8) + causal).gt(0)
        non_pad = tgt.ne(0).float()[..., None]
        for layer in self.decoder:
            y = layer(y, non_pad, self_mask, memory, src_pad.expand(-1, t, -1))
        return self.proj(y) * self.logit_scale


def jadore_batch(b: int, device, src_len: int, tgt_len: int) -> tuple:
    """((src, src_pos, tgt, tgt_pos), gold) of b sentence pairs padded to the batch's longest."""
    long = dict(dtype=torch.long, device=device)
    return (torch.full((b, src_len), 4, **long), torch.ones(b, src_len, **long),
            torch.full((b, tgt_len), 4, **long), torch.ones(b, tgt_len, **long)), \
        torch.full((b, tgt_len), 4, **long)


def jadore_loss(logits, gold) -> torch.Tensor:  # jadore train.py cal_loss without smoothing: summed CE
    return F.cross_entropy(logits.flatten(0, 1), gold.flatten(), ignore_index=0, reduction="sum")
