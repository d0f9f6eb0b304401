# SPDX-License-Identifier: MIT
"""BERT (Devlin et al., NAACL 2019) as NVIDIA DeepLearningExamples runs it, built from torch.nn only.

Follows DLE's PyTorch/LanguageModeling/BERT/modeling.py (containers 21.x):
- Vocabulary 30522 (uncased) padded to a multiple of 8 = 30528, as DLE's run_pretraining.py and
  run_squad.py do before building the model (tensor-core friendly decoder/embedding shapes).
- Explicit attention: matmul, scale, + additive mask, softmax, dropout, matmul, as DLE's
  BertSelfAttention of the 2021-22 tables computes it (PyTorch had no flash attention before 2.0;
  scaled_dot_product_attention would count one fused kernel instead of five), separate
  query/key/value projections, post-LayerNorm, GELU feed-forward.
- Pre-training: MLM head (dense + GELU + LayerNorm, decoder tied to the word embedding) run only on
  the masked positions, as DLE's dense sequence output does, with a fixed max_predictions_per_seq
  (20 at seq 128, 80 at seq 512, the DLE data settings) standing in for the data-dependent count;
  NSP head on the pooled first token.
- SQuAD: a 2-logit span head per token (DLE's BertForQuestionAnswering); the pooler is left out
  because the span head does not use it (it would get no gradient).
"""

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class BertConfig:
    layers: int
    hidden: int
    heads: int
    ffn: int
    vocab: int = 30528  # 30522 padded to a multiple of 8 (DLE run_pretraining.py / run_squad.py)
    max_positions: int = 512
    type_vocab: int = 2
    dropout: float = 0.1


BERT_LARGE = BertConfig(layers=24, hidden=1024, heads=16, ffn=4096)  # Devlin et al. Table: BERT_LARGE
BERT_BASE = BertConfig(layers=12, hidden=768, heads=12, ffn=3072)  # Devlin et al.: BERT_BASE


class SelfAttention(nn.Module):  # DLE modeling.py BertSelfAttention (explicit softmax attention)
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.heads = c.heads
        self.query, self.key, self.value = (nn.Linear(c.hidden, c.hidden) for _ in range(3))
        self.dropout = nn.Dropout(c.dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        split = lambda t: t.view(b, s, self.heads, h // self.heads).transpose(1, 2)  # noqa: E731
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(h // self.heads) + mask
        probs = self.dropout(scores.softmax(dim=-1))
        return (probs @ v).transpose(1, 2).reshape(b, s, h)


class Layer(nn.Module):  # DLE modeling.py BertLayer: attention, output, intermediate (GELU), output
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.attention = SelfAttention(c)
        self.attention_out, self.attention_norm = nn.Linear(c.hidden, c.hidden), nn.LayerNorm(c.hidden, eps=1e-12)
        self.intermediate, self.out = nn.Linear(c.hidden, c.ffn), nn.Linear(c.ffn, c.hidden)
        self.out_norm = nn.LayerNorm(c.hidden, eps=1e-12)
        self.dropout = nn.Dropout(c.dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = self.attention_norm(x + self.dropout(self.attention_out(self.attention(x, mask))))
        return self.out_norm(x + self.dropout(self.out(F.gelu(self.intermediate(x)))))


class Bert(nn.Module):  # DLE modeling.py BertModel (embeddings + encoder [+ pooler])
    def __init__(self, c: BertConfig, pooler: bool) -> None:
        super().__init__()
        self.word = nn.Embedding(c.vocab, c.hidden)
        self.position = nn.Embedding(c.max_positions, c.hidden)
        self.token_type = nn.Embedding(c.type_vocab, c.hidden)
        self.norm, self.dropout = nn.LayerNorm(c.hidden, eps=1e-12), nn.Dropout(c.dropout)
        self.layers = nn.ModuleList(Layer(c) for _ in range(c.layers))
        self.pooler = nn.Linear(c.hidden, c.hidden) if pooler else None

    def forward(self, ids: torch.Tensor, types: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = self.dropout(self.norm(self.word(ids) + self.position(positions) + self.token_type(types)))
        additive = (1.0 - mask[:, None, None, :].to(x.dtype)) * -10000.0  # DLE extended_attention_mask
        for layer in self.layers:
            x = layer(x, additive)
        return x


class BertForPreTraining(nn.Module):  # DLE modeling.py BertForPreTraining (MLM + NSP heads)
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.bert = Bert(c, pooler=True)
        self.transform = nn.Linear(c.hidden, c.hidden)
        self.transform_norm = nn.LayerNorm(c.hidden, eps=1e-12)
        self.decoder_bias = nn.Parameter(torch.zeros(c.vocab))  # decoder weight tied to bert.word
        self.nsp = nn.Linear(c.hidden, 2)

    def forward(self, ids, types, mask, masked_positions):
        seq = self.bert(ids, types, mask)
        assert self.bert.pooler is not None  # built with pooler=True
        pooled = torch.tanh(self.bert.pooler(seq[:, 0]))
        picked = seq.gather(1, masked_positions[..., None].expand(-1, -1, seq.shape[-1]))
        mlm = F.linear(self.transform_norm(F.gelu(self.transform(picked))), self.bert.word.weight,
                       self.decoder_bias)
        return mlm, self.nsp(pooled)


class BertForQuestionAnswering(nn.Module):  # DLE modeling.py BertForQuestionAnswering (span head)
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.bert = Bert(c, pooler=False)
        self.qa = nn.Linear(c.hidden, 2)

    def forward(self, ids, types, mask):
        start, end = self.qa(self.bert(ids, types, mask)).unbind(-1)
        return start, end


def pretraining_batch(b: int, device, seq: int, predictions: int) -> tuple:
    """((ids, types, mask, masked_positions), (mlm_labels, nsp_labels)); values are arbitrary: counting needs only shapes."""
    long = dict(dtype=torch.long, device=device)
    inputs = (torch.zeros(b, seq, **long), torch.zeros(b, seq, **long), torch.ones(b, seq, **long),
              torch.zeros(b, predictions, **long))
    return inputs, (torch.zeros(b, predictions, **long), torch.zeros(b, **long))


def pretraining_loss(outputs, targets) -> torch.Tensor:  # DLE BertPretrainingCriterion: MLM + NSP
    (mlm, nsp), (mlm_labels, nsp_labels) = outputs, targets
    return F.cross_entropy(mlm.flatten(0, 1), mlm_labels.flatten(), ignore_index=-1) + \
        F.cross_entropy(nsp, nsp_labels)


def squad_batch(b: int, device, seq: int = 384) -> tuple:
    """((ids, types, mask), (start_positions, end_positions)); values are arbitrary: counting needs only shapes."""
    long = dict(dtype=torch.long, device=device)
    inputs = (torch.zeros(b, seq, **long), torch.zeros(b, seq, **long), torch.ones(b, seq, **long))
    return inputs, (torch.zeros(b, **long), torch.zeros(b, **long))


def squad_loss(outputs, targets) -> torch.Tensor:  # DLE run_squad.py: mean of start and end CE
    (start, end), (start_pos, end_pos) = outputs, targets
    return (F.cross_entropy(start, start_pos) + F.cross_entropy(end, end_pos)) / 2
