# SPDX-License-Identifier: MIT
"""Transformer-XL (Dai et al., ACL 2019) as NVIDIA DeepLearningExamples trains it on WikiText-103
(PyTorch/LanguageModeling/Transformer-XL/pytorch: mem_transformer.py, utils/proj_adaptive_softmax.py,
wt103_{base,large}.yaml; SOURCE_small.md 1.4), laid out (length, batch, ...) as that code is.

A segment of tgt_len tokens attends to itself and to mem_len cached hidden states of the previous
segment (inputs without gradient, one per layer). Each layer: relative multi-head attention with
the learnable biases u, v shared by all layers (RelPartialLearnableMultiHeadAttn: packed q/k/v
projection of [memory, segment], a projection of the sinusoidal relative positions, content and
position scores by einsum, the relative shift, causal mask, softmax, attention dropout, output
projection, residual, post-norm LayerNorm), then a ReLU feed-forward with residual and LayerNorm.
Input and output share the adaptive embedding / softmax of Grave et al. 2017 (cutoffs 19,997,
39,997, 199,997 of the 267,735 words; div_val 1 for base, 4 for large, whose clusters are 1024,
256, 64 and 16 wide with projections to d_model): the head scores the shortlist and one logit per
tail cluster for every token, a tail cluster scores only the tokens that fall in it.

Which tokens fall in a tail cluster depends on the text, so the count takes the shares of a Zipf
law of exponent 1 over the vocabulary (Zipf 1949; the share of ranks [a, b) is
(ln b - ln a) / (ln V + 0.5772), harmonic numbers): 0.80 of the tokens in the shortlist, then 0.053,
0.123 and 0.022 in the three tails; the tails are about a tenth of base's step FLOPs (10.9%).
WikiText-103 keeps only words seen at least 3 times, so its real tail is thinner than Zipf's: a
0.91 / 0.05 / 0.04 / 0.003 split would lower base's step FLOPs by 7% and large's by 0.2%.
"""

import math
from dataclasses import dataclass
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from thrifty.workloads.transformer_nmt import sinusoid_table

VOCAB = 267_735
CUTOFFS = (19_997, 39_997, 199_997)
EULER_GAMMA = 0.5772156649


@dataclass(frozen=True)
class XLConfig:
    layers: int
    d_model: int
    heads: int
    d_head: int
    d_inner: int
    tgt_len: int
    mem_len: int
    dropout: float
    dropatt: float
    div_val: int


BASE = XLConfig(16, 512, 8, 64, 2048, 192, 192, 0.1, 0.0, 1)  # wt103_base.yaml
LARGE = XLConfig(18, 1024, 16, 64, 4096, 384, 384, 0.2, 0.2, 4)  # wt103_large.yaml


def zipf_shares(bounds: tuple[int, ...] = (0, *CUTOFFS, VOCAB)) -> list[float]:
    """Share of the tokens whose frequency rank falls in each [bounds[i], bounds[i+1]) under Zipf(1)."""
    total = math.log(bounds[-1]) + EULER_GAMMA
    first = [math.log(bounds[1]) + EULER_GAMMA]
    return [s / total for s in first + [math.log(b / a) for a, b in zip(bounds[1:-1], bounds[2:], strict=True)]]


def cluster_bounds() -> list[tuple[int, int]]:
    edges = (0, *CUTOFFS, VOCAB)
    return list(zip(edges[:-1], edges[1:], strict=True))


class AdaptiveEmbedding(nn.Module):
    """Per-cluster embedding tables (width d_model / div_val**i) and projections to d_model; with
    div_val 1 one table and no projection. Scaled by sqrt(d_model)."""

    def __init__(self, c: XLConfig) -> None:
        super().__init__()
        self.c = c
        widths = [c.d_model // c.div_val**i for i in range(len(CUTOFFS) + 1)] if c.div_val > 1 else [c.d_model]
        spans = cluster_bounds() if c.div_val > 1 else [(0, VOCAB)]
        self.tables = nn.ModuleList(nn.Embedding(hi - lo, w) for (lo, hi), w in zip(spans, widths, strict=True))
        self.projs = nn.ParameterList(nn.Parameter(torch.zeros(c.d_model, w)) for w in widths) if c.div_val > 1 else None

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        if self.projs is None:
            return self.tables[0](tokens) * self.c.d_model**0.5
        flat = tokens.reshape(-1)
        out = torch.zeros(flat.shape[0], self.c.d_model, device=tokens.device)
        for table, proj, share in zip(self.tables, self.projs, zipf_shares(), strict=True):
            rows = torch.arange(max(1, round(share * flat.shape[0])), device=tokens.device)
            size = cast(nn.Embedding, table).num_embeddings
            out = out.index_copy(0, rows, F.linear(table(flat[rows] % size), proj))
        return out.view(*tokens.shape, self.c.d_model) * self.c.d_model**0.5


class RelAttention(nn.Module):
    def __init__(self, c: XLConfig) -> None:
        super().__init__()
        self.c = c
        inner = c.heads * c.d_head
        self.qkv = nn.Linear(c.d_model, 3 * inner, bias=False)
        self.r_net = nn.Linear(c.d_model, inner, bias=False)
        self.o_net = nn.Linear(inner, c.d_model, bias=False)
        self.norm = nn.LayerNorm(c.d_model)

    @staticmethod
    def rel_shift(x: torch.Tensor) -> torch.Tensor:  # mem_transformer.py _rel_shift
        pad = torch.zeros((x.size(0), 1, *x.size()[2:]), device=x.device, dtype=x.dtype)
        padded = torch.cat([pad, x], dim=1).view(x.size(1) + 1, x.size(0), *x.size()[2:])
        return padded[1:].view_as(x)

    def forward(self, w, r, u, v, mask, mem) -> torch.Tensor:
        c = self.c
        qlen, bsz = w.shape[:2]
        heads = self.qkv(torch.cat([mem, w], 0))
        q, k, val = torch.chunk(heads, 3, dim=-1)
        q = q[-qlen:].view(qlen, bsz, c.heads, c.d_head)
        k, val = (t.view(t.shape[0], bsz, c.heads, c.d_head) for t in (k, val))
        r_k = self.r_net(r).view(r.shape[0], c.heads, c.d_head)
        ac = torch.einsum("ibnd,jbnd->ijbn", q + u, k)
        bd = self.rel_shift(torch.einsum("ibnd,jnd->ijbn", q + v, r_k))
        score = ((ac + bd) * c.d_head**-0.5).masked_fill(mask[:, :, None, None], -float("inf"))
        prob = F.dropout(F.softmax(score, dim=1), c.dropatt, self.training)
        vec = torch.einsum("ijbn,jbnd->ibnd", prob, val).reshape(qlen, bsz, -1)
        return self.norm(w + F.dropout(self.o_net(vec), c.dropout, self.training))


class XLLayer(nn.Module):
    def __init__(self, c: XLConfig) -> None:
        super().__init__()
        self.attn, self.c = RelAttention(c), c
        self.ff1, self.ff2 = nn.Linear(c.d_model, c.d_inner), nn.Linear(c.d_inner, c.d_model)
        self.norm = nn.LayerNorm(c.d_model)

    def forward(self, w, r, u, v, mask, mem) -> torch.Tensor:
        x = self.attn(w, r, u, v, mask, mem)
        core = F.dropout(self.ff2(F.dropout(F.relu(self.ff1(x)), self.c.dropout, self.training)),
                         self.c.dropout, self.training)
        return self.norm(x + core)


class TransformerXL(nn.Module):
    """MemTransformerLM: forward(tokens, mems, target) returns the loss, as DLE's does."""

    def __init__(self, c: XLConfig) -> None:
        super().__init__()
        self.c = c
        self.embed = AdaptiveEmbedding(c)
        self.layers = nn.ModuleList(XLLayer(c) for _ in range(c.layers))
        self.u = nn.Parameter(torch.zeros(c.heads, c.d_head))
        self.v = nn.Parameter(torch.zeros(c.heads, c.d_head))
        self.positions: torch.Tensor
        self.register_buffer("positions", sinusoid_table(c.tgt_len + c.mem_len, c.d_model).flip(0), persistent=False)
        self.cluster_weight = nn.Parameter(torch.zeros(len(CUTOFFS), c.d_model))
        self.cluster_bias = nn.Parameter(torch.zeros(len(CUTOFFS)))
        self.out_biases = nn.ParameterList(nn.Parameter(torch.zeros(hi - lo)) for lo, hi in cluster_bounds())
        # the head's own output projection (tie_projs[0] is false; div_val 1 needs none: d_embed = d_model)
        self.head_proj = nn.Parameter(torch.zeros(c.d_model, c.d_model)) if c.div_val > 1 else None

    def forward(self, tokens: torch.Tensor, mems: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        c = self.c
        qlen, mlen = tokens.shape[0], mems.shape[1]
        x = F.dropout(self.embed(tokens), c.dropout, self.training)
        r = F.dropout(self.positions[-(qlen + mlen):], c.dropout, self.training)
        mask = torch.triu(torch.ones(qlen, qlen + mlen, dtype=torch.bool, device=tokens.device), diagonal=1 + mlen)
        for layer, mem in zip(self.layers, mems, strict=True):
            x = layer(x, r, self.u, self.v, mask, mem)
        return adaptive_softmax_loss(self, F.dropout(x, c.dropout, self.training), target)


def adaptive_softmax_loss(model: TransformerXL, hidden: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Negative log-likelihood of ProjectedAdaptiveLogSoftmax with the output layer tied to the
    embedding tables (and, beyond the head, to their projections: tie_projs [false, true, ...])."""
    c, h = model.c, hidden.reshape(-1, hidden.shape[-1])
    if model.head_proj is not None:
        h_head = F.linear(h, model.head_proj.t())
    else:
        h_head = h
    tokens, tables, bounds = h.shape[0], model.embed.tables, cluster_bounds()
    if c.div_val == 1:
        weights = [cast(nn.Embedding, tables[0]).weight[lo:hi] for lo, hi in bounds]
        projs: list[torch.Tensor | None] = [None] * len(bounds)
    else:
        weights = [cast(nn.Embedding, t).weight for t in tables]
        projs = [None, *list(cast(nn.ParameterList, model.embed.projs))[1:]]
    head = F.linear(h_head, torch.cat([weights[0], model.cluster_weight]), torch.cat([model.out_biases[0], model.cluster_bias]))
    head_lp = F.log_softmax(head, dim=1)
    nll = -head_lp[:, 0].sum()  # shortlist targets read their logit; tail targets their cluster's
    for i, share in enumerate(zipf_shares()[1:], start=1):
        rows = torch.arange(max(1, round(share * tokens)), device=h.device)
        hi, proj = h[rows], projs[i]
        if proj is not None:
            hi = F.linear(hi, proj.t())
        tail_lp = F.log_softmax(F.linear(hi, weights[i], model.out_biases[i]), dim=1)
        nll = nll - (head_lp[rows, -i] + tail_lp[:, 0]).sum()
    del target  # which logit each token reads does not change the work
    return nll / tokens


def segment_batch(b: int, device, c: XLConfig) -> tuple:
    """b segments of tgt_len tokens and their memories: ((tokens, mems, target), None)."""
    tokens = torch.zeros(c.tgt_len, b, dtype=torch.long, device=device)
    mems = torch.zeros(c.layers, c.mem_len, b, c.d_model, device=device)
    return (tokens, mems, tokens), None


def model_loss(loss: torch.Tensor, _target) -> torch.Tensor:
    return loss
