# SPDX-License-Identifier: MIT
"""Tacotron 2 (Shen et al., ICASSP 2018) as NVIDIA DeepLearningExamples trains it on LJSpeech
(PyTorch/SpeechSynthesis/Tacotron2, tacotron2/model.py and arg_parser.py defaults; SOURCE_small.md
1.5): 148 symbols embedded in 512; encoder of 3 convolutions (512, kernel 5, batch norm, ReLU,
dropout 0.5) and a bidirectional LSTM (256 per direction); a decoder run once per mel frame with
teacher forcing: prenet (two 256 ReLU layers, dropout 0.5 also in training) of the previous frame,
an attention LSTM cell (1024), location-sensitive attention (query and memory projections to 128,
32 location filters of kernel 31 over the previous and cumulative weights), a decoder LSTM cell
(1024), a linear projection to 80 mel channels and a stop-gate logit; postnet of 5 convolutions
(512, kernel 5, batch norm, tanh, dropout 0.5). Loss: MSE of the mel frames before and after the
postnet plus the gate's BCE; Adam (weight decay 1e-6), per-parameter as in PyTorch 1.6.

The frame-by-frame decoder makes it the launch-bound row of the calibration: some 25 small kernels
per frame forward and 40 backward, ~870 frames a step, whatever the batch.

Lengths (LJSpeech 1.1 statistics, keithito.com/LJ-Speech-Dataset: 13,100 clips, mean 6.57 s, max
10.10 s, 1,308,678 characters): DLE's collate pads a batch to its longest text and longest mel;
in a batch of 48-128 clips the longest is near the 10.1 s maximum: 1 + 10.10 x 22,050 / 256 = 870
frames, and its text about mean characters (100) x 10.10 / 6.57, 154, padded here to 160. A
published sample is a real mel frame: a clip has 1 + 6.57 x 22,050 / 256 = 567 on average.
"""

import torch
import torch.nn.functional as F
from torch import nn

SYMBOLS, EMBED, MELS = 148, 512, 80
ATTENTION_RNN, DECODER_RNN, PRENET, ATTENTION_DIM = 1024, 1024, 256, 128
LOCATION_FILTERS, LOCATION_KERNEL = 32, 31
TEXT_CHARS, MEL_FRAMES, MEAN_FRAMES = 160, 870, 567


def _conv_bn(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv1d(cin, cout, 5, padding=2), nn.BatchNorm1d(cout))


class LocationAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.query = nn.Linear(ATTENTION_RNN, ATTENTION_DIM, bias=False)
        self.memory = nn.Linear(EMBED, ATTENTION_DIM, bias=False)
        self.location_conv = nn.Conv1d(2, LOCATION_FILTERS, LOCATION_KERNEL, padding=LOCATION_KERNEL // 2, bias=False)
        self.location_dense = nn.Linear(LOCATION_FILTERS, ATTENTION_DIM, bias=False)
        self.v = nn.Linear(ATTENTION_DIM, 1, bias=False)

    def forward(self, query, memory, processed_memory, weights_cat, mask):
        location = self.location_dense(self.location_conv(weights_cat).transpose(1, 2))
        energies = self.v(torch.tanh(self.query(query.unsqueeze(1)) + location + processed_memory)).squeeze(-1)
        weights = F.softmax(energies.masked_fill(mask, -float("inf")), dim=1)
        return torch.bmm(weights.unsqueeze(1), memory).squeeze(1), weights


class Tacotron2(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.Embedding(SYMBOLS, EMBED)
        self.encoder_convs = nn.ModuleList(_conv_bn(EMBED, EMBED) for _ in range(3))
        self.encoder_lstm = nn.LSTM(EMBED, EMBED // 2, batch_first=True, bidirectional=True)
        self.prenet = nn.ModuleList([nn.Linear(MELS, PRENET, bias=False), nn.Linear(PRENET, PRENET, bias=False)])
        self.attention_rnn = nn.LSTMCell(PRENET + EMBED, ATTENTION_RNN)
        self.attention = LocationAttention()
        self.decoder_rnn = nn.LSTMCell(ATTENTION_RNN + EMBED, DECODER_RNN)
        self.projection = nn.Linear(DECODER_RNN + EMBED, MELS)
        self.gate = nn.Linear(DECODER_RNN + EMBED, 1)
        self.postnet = nn.ModuleList([_conv_bn(MELS, 512), *(_conv_bn(512, 512) for _ in range(3)), _conv_bn(512, MELS)])

    def encode(self, text: torch.Tensor) -> torch.Tensor:
        x = self.embedding(text).transpose(1, 2)
        for conv in self.encoder_convs:
            x = F.dropout(F.relu(conv(x)), 0.5, self.training)
        return self.encoder_lstm(x.transpose(1, 2))[0]

    def decode(self, memory: torch.Tensor, mels: torch.Tensor, mask: torch.Tensor) -> tuple:
        b, frames = mels.shape[0], mels.shape[2]
        go = torch.zeros(b, MELS, 1, device=mels.device)
        x = torch.cat([go, mels[:, :, :-1]], dim=2).transpose(1, 2)
        for layer in self.prenet:
            x = F.dropout(F.relu(layer(x)), 0.5, True)  # Tacotron 2 keeps the prenet's dropout on
        processed_memory = self.attention.memory(memory)
        zeros = lambda *shape: torch.zeros(*shape, device=mels.device)  # noqa: E731
        att_h, att_c, dec_h, dec_c = zeros(b, ATTENTION_RNN), zeros(b, ATTENTION_RNN), zeros(b, DECODER_RNN), zeros(b, DECODER_RNN)
        weights, weights_cum, context = zeros(b, memory.shape[1]), zeros(b, memory.shape[1]), zeros(b, EMBED)
        outputs, gates = [], []
        for t in range(frames):
            att_h, att_c = self.attention_rnn(torch.cat([x[:, t], context], -1), (att_h, att_c))
            att_h = F.dropout(att_h, 0.1, self.training)
            weights_cat = torch.cat([weights.unsqueeze(1), weights_cum.unsqueeze(1)], dim=1)
            context, weights = self.attention(att_h, memory, processed_memory, weights_cat, mask)
            weights_cum = weights_cum + weights
            dec_h, dec_c = self.decoder_rnn(torch.cat([att_h, context], -1), (dec_h, dec_c))
            dec_h = F.dropout(dec_h, 0.1, self.training)
            both = torch.cat([dec_h, context], dim=1)
            outputs.append(self.projection(both))
            gates.append(self.gate(both))
        return torch.stack(outputs, dim=2), torch.cat(gates, dim=1)

    def forward(self, text: torch.Tensor, mels: torch.Tensor) -> tuple:
        memory = self.encode(text)
        mask = torch.zeros(text.shape, dtype=torch.bool, device=text.device)  # padded characters
        mel_out, gate_out = self.decode(memory, mels, mask)
        post = mel_out
        for i, conv in enumerate(self.postnet):
            post = conv(post)
            post = F.dropout(torch.tanh(post) if i < len(self.postnet) - 1 else post, 0.5, self.training)
        return mel_out, mel_out + post, gate_out


def clip_batch(b: int, device) -> tuple:
    text = torch.zeros(b, TEXT_CHARS, dtype=torch.long, device=device)
    mels = torch.zeros(b, MELS, MEL_FRAMES, device=device)
    return (text, mels), (mels, torch.zeros(b, MEL_FRAMES, device=device))


def tacotron2_loss(outputs: tuple, targets: tuple) -> torch.Tensor:  # DLE Tacotron2Loss
    mel_out, mel_post, gate_out = outputs
    mels, gate_target = targets
    return (F.mse_loss(mel_out, mels) + F.mse_loss(mel_post, mels)
            + F.binary_cross_entropy_with_logits(gate_out, gate_target))
