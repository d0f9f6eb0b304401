# SPDX-License-Identifier: MIT
"""GNMT v2 as NVIDIA DeepLearningExamples trains it (PyTorch/Translation/GNMT, seq2seq/models:
gnmt.py, encoder.py, decoder.py, attention.py; SOURCE_small.md 1.3): 4-layer LSTM encoder (the
first bidirectional, residuals from the third), 4-layer LSTM decoder whose first layer feeds a
normalised Bahdanau attention and whose later layers take [output, context] (residuals from the
third), hidden and embedding 1024, shared 32,320-token vocabulary, dropout 0.2."""

import torch
import torch.nn.functional as F
from torch import nn

VOCAB, HIDDEN, DROPOUT = 32_320, 1024, 0.2


class BahdanauAttention(nn.Module):
    """Normalised Bahdanau attention (attention.py): score = v/|v| . tanh(W_q q + W_k k + b)."""

    def __init__(self, units: int = HIDDEN) -> None:
        super().__init__()
        self.linear_q, self.linear_k = nn.Linear(units, units, bias=False), nn.Linear(units, units, bias=False)
        self.linear_att = nn.Parameter(torch.empty(units).uniform_(-0.1, 0.1))
        self.normalize_bias = nn.Parameter(torch.zeros(units))
        self.normalize_scalar = nn.Parameter(torch.tensor(1.0 / units**0.5))

    def forward(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        qk = self.linear_q(query).unsqueeze(2) + self.linear_k(keys).unsqueeze(1) + self.normalize_bias
        v = self.normalize_scalar * self.linear_att / self.linear_att.norm()
        scores = F.softmax(torch.tanh(qk) @ v, dim=-1)  # (b, t_tgt, t_src)
        return torch.bmm(scores, keys)


class GNMT(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed_src, self.embed_tgt = nn.Embedding(VOCAB, HIDDEN), nn.Embedding(VOCAB, HIDDEN)
        self.encoder = nn.ModuleList([nn.LSTM(HIDDEN, HIDDEN, batch_first=True, bidirectional=True),
                                      nn.LSTM(2 * HIDDEN, HIDDEN, batch_first=True),
                                      nn.LSTM(HIDDEN, HIDDEN, batch_first=True),
                                      nn.LSTM(HIDDEN, HIDDEN, batch_first=True)])
        self.att_rnn, self.attention = nn.LSTM(HIDDEN, HIDDEN, batch_first=True), BahdanauAttention()
        self.decoder = nn.ModuleList(nn.LSTM(2 * HIDDEN, HIDDEN, batch_first=True) for _ in range(3))
        self.classifier = nn.Linear(HIDDEN, VOCAB)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        x = F.dropout(self.embed_src(src), DROPOUT, self.training)
        for i, rnn in enumerate(self.encoder):
            out = rnn(F.dropout(x, DROPOUT, self.training) if i else x)[0]
            x = out + x if i >= 2 else out
        keys = x
        y = self.att_rnn(F.dropout(self.embed_tgt(tgt), DROPOUT, self.training))[0]
        context = self.attention(y, keys)
        for i, rnn in enumerate(self.decoder):
            out = rnn(torch.cat([F.dropout(y, DROPOUT, self.training), context], dim=2))[0]
            y = out + y if i >= 1 else out
        return self.classifier(F.dropout(y, DROPOUT, self.training))


def gnmt_batch(b: int, device, src_len: int, tgt_len: int) -> tuple:
    src = torch.zeros(b, src_len, dtype=torch.long, device=device)
    tgt = torch.zeros(b, tgt_len, dtype=torch.long, device=device)
    return (src, tgt), tgt


def gnmt_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:  # label smoothing 0.1
    return F.cross_entropy(logits.flatten(0, 1), target.flatten(), label_smoothing=0.1)
