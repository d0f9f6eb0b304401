# SPDX-License-Identifier: MIT
"""WaveGlow (Prenger, Valle & Catanzaro, ICASSP 2019) as NVIDIA DeepLearningExamples trains it
(PyTorch/SpeechSynthesis/Tacotron2, waveglow/model.py and arg_parser.py defaults; SOURCE_small.md
1.5): 12 flows over audio folded into 8 groups, 2 channels split off after every 4 flows; each flow
is an invertible 1x1 convolution and an affine coupling whose (log s, t) come from a WaveNet-like
network (8 weight-normed layers of 512 channels, kernel 3, dilations 1..128, gated tanh x sigmoid,
residual and skip 1x1s) conditioned on the mel spectrogram, upsampled to the audio rate by one
transposed convolution (80 -> 80 channels, kernel 1024, stride 256 = the STFT hop). Loss: the
flow's negative log-likelihood under N(0, sigma=1), with Adam (DLE train.py).

The gate tanh(a) x sigmoid(b) is counted as eager PyTorch runs it (add, tanh, sigmoid, multiply);
DLE scripts it with TorchScript, whose fuser makes it one kernel, so the count's elementwise
traffic is an upper bound. A counted sample is one training segment: 8,000 audio samples and its 32 mel frames (1 + 8000 //
256 with a centred STFT)."""

from typing import cast

import torch
from torch import nn
from torch.nn.utils.parametrizations import weight_norm

MELS, HOP, SEGMENT = 80, 256, 8000
FLOWS, GROUPS, EARLY_EVERY, EARLY_SIZE = 12, 8, 4, 2
WN_LAYERS, WN_CHANNELS, WN_KERNEL = 8, 512, 3
MEL_FRAMES = 1 + SEGMENT // HOP


class WN(nn.Module):
    """The coupling network: start 1x1, gated dilated layers with conditioning, end 1x1 -> (log s, t)."""

    def __init__(self, n_in: int, n_cond: int) -> None:
        super().__init__()
        self.start = weight_norm(nn.Conv1d(n_in, WN_CHANNELS, 1))
        self.in_layers = nn.ModuleList(
            weight_norm(nn.Conv1d(WN_CHANNELS, 2 * WN_CHANNELS, WN_KERNEL, dilation=2**i,
                                  padding=2**i * (WN_KERNEL - 1) // 2)) for i in range(WN_LAYERS))
        self.cond_layers = nn.ModuleList(weight_norm(nn.Conv1d(n_cond, 2 * WN_CHANNELS, 1))
                                         for _ in range(WN_LAYERS))
        self.res_skip = nn.ModuleList(
            weight_norm(nn.Conv1d(WN_CHANNELS, 2 * WN_CHANNELS if i < WN_LAYERS - 1 else WN_CHANNELS, 1))
            for i in range(WN_LAYERS))
        self.end = nn.Conv1d(WN_CHANNELS, 2 * n_in, 1)

    def forward(self, audio: torch.Tensor, spect: torch.Tensor) -> torch.Tensor:
        x = self.start(audio)
        output = torch.zeros_like(x)
        for i in range(WN_LAYERS):
            acts = self.in_layers[i](x) + self.cond_layers[i](spect)
            acts = torch.tanh(acts[:, :WN_CHANNELS]) * torch.sigmoid(acts[:, WN_CHANNELS:])
            res_skip = self.res_skip[i](acts)
            if i < WN_LAYERS - 1:
                x = x + res_skip[:, :WN_CHANNELS]
                output = output + res_skip[:, WN_CHANNELS:]
            else:
                output = output + res_skip
        return self.end(output)


class WaveGlow(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.upsample = nn.ConvTranspose1d(MELS, MELS, 1024, stride=HOP)
        self.convinv, self.wn = nn.ModuleList(), nn.ModuleList()
        remaining = GROUPS
        for k in range(FLOWS):
            if k % EARLY_EVERY == 0 and k > 0:
                remaining -= EARLY_SIZE
            self.convinv.append(nn.Conv1d(remaining, remaining, 1, bias=False))
            self.wn.append(WN(remaining // 2, MELS * GROUPS))

    def forward(self, spect: torch.Tensor, audio: torch.Tensor) -> tuple:
        spect = self.upsample(spect)[:, :, :audio.shape[1]]  # (b, mels, samples)
        b, frames = audio.shape[0], audio.shape[1] // GROUPS
        spect = spect.unfold(2, GROUPS, GROUPS).permute(0, 2, 1, 3).reshape(b, frames, -1).permute(0, 2, 1)
        audio = audio.unfold(1, GROUPS, GROUPS).permute(0, 2, 1)  # (b, groups, frames)
        kept: list[torch.Tensor] = []
        log_s_sum: torch.Tensor | float = 0.0
        log_det_w: torch.Tensor | float = 0.0
        for k in range(FLOWS):
            if k % EARLY_EVERY == 0 and k > 0:
                kept.append(audio[:, :EARLY_SIZE])
                audio = audio[:, EARLY_SIZE:]
            convinv = cast(nn.Conv1d, self.convinv[k])
            audio = convinv(audio)
            log_det_w = log_det_w + b * frames * torch.logdet(convinv.weight.squeeze(-1))
            half = audio.shape[1] // 2
            log_s_t = self.wn[k](audio[:, :half], spect)
            log_s, t = log_s_t[:, half:], log_s_t[:, :half]
            audio = torch.cat([audio[:, :half], torch.exp(log_s) * audio[:, half:] + t], dim=1)
            log_s_sum = log_s_sum + log_s.sum()
        return torch.cat([*kept, audio], dim=1), log_s_sum, log_det_w


def segment_batch(b: int, device) -> tuple:
    return (torch.zeros(b, MELS, MEL_FRAMES, device=device), torch.zeros(b, SEGMENT, device=device)), None


def waveglow_loss(outputs: tuple, _target, sigma: float = 1.0) -> torch.Tensor:
    """DLE WaveGlowLoss: sum(z^2) / (2 sigma^2) - sum(log s) - log|det W|, per element."""
    z, log_s_sum, log_det_w = outputs
    return (torch.sum(z * z) / (2 * sigma**2) - log_s_sum - log_det_w) / z.numel()

