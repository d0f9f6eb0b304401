# SPDX-License-Identifier: MIT
"""Jasper 10x5 dense-residual and QuartzNet 15x5 (the Jasper family of 1-D convolutional acoustic
models) as NVIDIA DeepLearningExamples trains them (PyTorch/SpeechRecognition/{Jasper,QuartzNet},
common/jasper.py-style blocks; configs jasper10x5dr_speedp-online_speca.yaml and
quartznet15x5_speedp-online-1.15_speca.yaml; SOURCE_small.md 1.6 and 1.7).

A block repeats `repeat` sub-blocks of masked convolution (QuartzNet: time-channel separable, a
depthwise convolution then a pointwise one), batch norm (eps 1e-3), ReLU and dropout; the last
sub-block's ReLU and dropout follow the residual sum. Jasper's residuals are dense: a block adds a
1x1 convolution + batch norm of the prologue's and of every earlier block's output; QuartzNet's
block adds one of its own input. Masked convolutions zero the padded frames of their input first
(one elementwise multiply per convolution). Input: 64 mel filterbanks at a 10 ms stride; output:
29 labels (space, a-z, apostrophe, CTC blank), trained with CTC.

Lengths: DLE pads a batch to its longest utterance (then to a multiple of 16); LibriSpeech's
training utterances are capped at 16.7 s and most lie between 12 and 16.7 s, so a batch of 32 or
more is padded close to the cap: a counted utterance is 1,680 frames (16.8 s). Online speed
perturbation (0.85-1.15) after the duration filter could stretch the longest to ~19 s (+10-14% of
the work); DLE's masks are built per convolution from the lengths (some 7 tiny kernels each,
counted here as one multiply: ~1% of a Jasper step at the launch floor).
"""

from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

MELS, LABELS, PADDED_FRAMES = 64, 29, 1680
# (filters, kernel, repeat, stride, dilation, dropout) per block of each encoder.
JASPER_10X5 = ([(256, 11, 1, 2, 1, 0.2)]
               + [spec for spec in ((256, 11, 5, 1, 1, 0.2), (384, 13, 5, 1, 1, 0.2), (512, 17, 5, 1, 1, 0.2),
                                    (640, 21, 5, 1, 1, 0.3), (768, 25, 5, 1, 1, 0.3)) for _ in range(2)]
               + [(896, 29, 1, 1, 2, 0.4), (1024, 1, 1, 1, 1, 0.4)])
QUARTZNET_15X5 = ([(256, 33, 1, 2, 1, 0.0)]
                  + [spec for spec in ((256, 33, 5, 1, 1, 0.0), (256, 39, 5, 1, 1, 0.0), (512, 51, 5, 1, 1, 0.0),
                                       (512, 63, 5, 1, 1, 0.0), (512, 75, 5, 1, 1, 0.0)) for _ in range(3)]
                  + [(512, 87, 1, 1, 2, 0.0), (1024, 1, 1, 1, 1, 0.0)])


class MaskedConv1d(nn.Conv1d):
    """A convolution that zeroes its input's padded frames first (DLE MaskedConv1d)."""

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return super().forward(x * mask)


class JasperBlock(nn.Module):
    def __init__(self, cin: int, filters: int, kernel: int, repeat: int, stride: int, dilation: int,
                 dropout: float, separable: bool, residual_panes: list[int]) -> None:
        super().__init__()
        self.convs = nn.ModuleList()
        self.norms = nn.ModuleList()
        pad = dilation * (kernel // 2)
        for i in range(repeat):
            c = cin if i == 0 else filters
            if separable and kernel > 1:
                self.convs.append(nn.ModuleList([
                    MaskedConv1d(c, c, kernel, stride, pad, dilation, groups=c, bias=False),
                    MaskedConv1d(c, filters, 1, bias=False)]))
            else:
                self.convs.append(nn.ModuleList([MaskedConv1d(c, filters, kernel, stride, pad, dilation, bias=False)]))
            self.norms.append(nn.BatchNorm1d(filters, eps=1e-3))
        self.residuals = nn.ModuleList(nn.ModuleList([MaskedConv1d(p, filters, 1, bias=False),
                                                      nn.BatchNorm1d(filters, eps=1e-3)])
                                       for p in residual_panes)
        self.dropout = dropout

    def forward(self, x: torch.Tensor, panes: list[torch.Tensor], mask: torch.Tensor) -> torch.Tensor:
        """`panes` are the tensors the residual 1x1s take (one per residual pane)."""
        frames_mask = mask
        for i, (convs, norm) in enumerate(zip(self.convs, self.norms, strict=True)):
            for conv in cast(list[MaskedConv1d], convs):
                x = conv(x, frames_mask)
                frames_mask = frames_mask[..., ::conv.stride[0]]
            x = norm(x)
            if i < len(self.convs) - 1:
                x = F.dropout(F.relu(x), self.dropout, self.training)
        for residual, pane in zip(self.residuals, panes, strict=True):
            residual_conv, residual_norm = cast(nn.ModuleList, residual)
            x = x + residual_norm(residual_conv(pane, mask))
        return F.dropout(F.relu(x), self.dropout, self.training)


class JasperFamily(nn.Module):
    """Prologue, residual blocks, epilogue and a 1x1 decoder to log-probabilities (b, labels, t)."""

    def __init__(self, blocks: list[tuple], separable: bool, dense: bool) -> None:
        super().__init__()
        self.blocks = nn.ModuleList()
        cin, outputs = MELS, list[int]()
        for index, (filters, kernel, repeat, stride, dilation, dropout) in enumerate(blocks):
            residual = 0 < index < len(blocks) - 2
            panes = (outputs if dense else outputs[-1:]) if residual else []
            # the last block of QuartzNet (1x1, 1024) is a plain convolution (SOURCE_small.md 1.7)
            self.blocks.append(JasperBlock(cin, filters, kernel, repeat, stride, dilation, dropout,
                                           separable and kernel > 1, panes))
            cin = filters
            outputs.append(filters)
        self.dense = dense
        self.decoder = nn.Conv1d(cin, LABELS, 1)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        mask = torch.ones_like(features[:, :1])
        outputs: list[torch.Tensor] = []
        x = features
        for index, block in enumerate(self.blocks):
            residual = 0 < index < len(self.blocks) - 2
            x = block(x, (outputs if self.dense else [x]) if residual else [], mask)
            if index == 0:
                mask = mask[..., ::2]  # the prologue's stride 2 halves the frames
            outputs.append(x)
        return F.log_softmax(self.decoder(x), dim=1)


def jasper_10x5_dr() -> JasperFamily:
    return JasperFamily(JASPER_10X5, separable=False, dense=True)


def quartznet_15x5() -> JasperFamily:
    return JasperFamily(QUARTZNET_15X5, separable=True, dense=False)


def utterance_batch(b: int, device, frames: int = PADDED_FRAMES) -> tuple:
    return torch.zeros(b, MELS, frames, device=device), torch.zeros(b, frames // 2, dtype=torch.long, device=device)


def ctc_loss(log_probs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """CTC as its GPU kernel costs it: one pass that reads the (b, labels, t) log-probabilities and
    writes their gradient. The forward-backward over the label lattice (t x (2 x transcript + 1)
    states, ~2e5 per utterance) is a few hundredth of a percent of the step's FLOPs, and torch has
    no meta kernel for it, so the count takes the negative log-probability of the blank label at
    every frame: the same tensors read and written, the lattice left out."""
    del targets  # the lattice's size, not the labels, sets the cost, and it is left out
    return -log_probs[:, -1].sum() / log_probs.shape[0]
