# SPDX-License-Identifier: MIT
"""nnU-Net's U-Net (Isensee et al., Nature Methods 2021) as NVIDIA DeepLearningExamples trains it on
MSD Task01 BrainTumour (PyTorch/Segmentation/nnUNet, container 22.11), built from torch.nn only.

DLE builds MONAI's DynUNet with the kernels and strides of nnunet/utils get_unet_params: for the
isotropic BraTS spacing every stage halves each side while it is >= 8, so both the 2D patch
192x160 and the 3D patch 128^3 get 5 downsamplings (6 levels; bottleneck 6x5 and 4^3). Filters
32 doubling, capped at 320 in 3D and 512 in 2D (DynUNet's default; nnU-Net's own 2D cap is 480).
Each level: two 3x3(x3) convolutions without bias, each followed by affine instance norm and
leaky ReLU (0.01); downsampling by the first convolution's stride 2; upsampling by a transposed
convolution (kernel = stride = 2, with bias), concatenation with the skip, two convolutions; a
1x1(x1) output convolution with bias. 4 input modalities, 4 output classes (background + 3).
Loss: Dice (softmax, without background, batch Dice) + cross-entropy (DLE loss.py). Deep
supervision is left out (an option the benchmark tables do not state; its heads are 1x1 convs).
"""

import torch
import torch.nn.functional as F
from torch import nn


class ConvBlock(nn.Module):  # MONAI UnetBasicBlock: (conv - instance norm - leaky ReLU) x 2
    def __init__(self, dim: int, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        conv, norm = (nn.Conv2d, nn.InstanceNorm2d) if dim == 2 else (nn.Conv3d, nn.InstanceNorm3d)
        self.body = nn.Sequential(conv(cin, cout, 3, stride, 1, bias=False), norm(cout, affine=True),
                                  nn.LeakyReLU(0.01, inplace=True),
                                  conv(cout, cout, 3, 1, 1, bias=False), norm(cout, affine=True),
                                  nn.LeakyReLU(0.01, inplace=True))

    def forward(self, x):
        return self.body(x)


class UpBlock(nn.Module):  # MONAI UnetUpBlock: transposed conv, concat skip, UnetBasicBlock
    def __init__(self, dim: int, cin: int, cout: int) -> None:
        super().__init__()
        transposed = nn.ConvTranspose2d if dim == 2 else nn.ConvTranspose3d
        self.up = transposed(cin, cout, 2, 2, bias=True)
        self.conv = ConvBlock(dim, 2 * cout, cout, 1)

    def forward(self, x, skip):
        return self.conv(torch.cat([self.up(x), skip], dim=1))


class DynUNet(nn.Module):  # MONAI networks/nets/dynunet.py as DLE nnunet/nn_unet.py builds it
    def __init__(self, dim: int, in_channels: int = 4, classes: int = 4, levels: int = 6) -> None:
        super().__init__()
        cap = 320 if dim == 3 else 512
        filters = [min(2 ** (5 + i), cap) for i in range(levels)]
        self.down = nn.ModuleList([ConvBlock(dim, in_channels, filters[0], 1)] +
                                  [ConvBlock(dim, filters[i - 1], filters[i], 2) for i in range(1, levels)])
        self.up = nn.ModuleList(UpBlock(dim, filters[i], filters[i - 1]) for i in range(levels - 1, 0, -1))
        self.out = (nn.Conv2d if dim == 2 else nn.Conv3d)(filters[0], classes, 1)

    def forward(self, x):
        skips = []
        for block in self.down:
            x = block(x)
            skips.append(x)
        for block, skip in zip(self.up, reversed(skips[:-1]), strict=True):
            x = block(x, skip)
        return self.out(x)


def unet_batch(b: int, device, patch: tuple[int, ...], in_channels: int = 4, classes: int = 4) -> tuple:
    """(image patches, (labels, one-hot labels)); values are arbitrary: counting needs only shapes."""
    labels = torch.zeros(b, *patch, dtype=torch.long, device=device)
    one_hot = torch.zeros(b, classes, *patch, device=device)
    return torch.zeros(b, in_channels, *patch, device=device), (labels, one_hot)


def dice_ce_loss(logits, targets) -> torch.Tensor:  # DLE nnunet loss.py: MONAI DiceLoss + CE
    labels, one_hot = targets
    probs = logits.softmax(dim=1)[:, 1:]  # include_background=False
    one_hot = one_hot[:, 1:]
    reduce = [0] + list(range(2, logits.dim()))  # batch=True: sums over batch and space
    intersection = (probs * one_hot).sum(reduce)
    denominator = probs.sum(reduce) + one_hot.sum(reduce)
    dice = 1.0 - (2.0 * intersection + 1e-5) / (denominator + 1e-5)
    return dice.mean() + F.cross_entropy(logits, labels)
