# SPDX-License-Identifier: MIT
"""SSD300 v1.1 (Liu et al., ECCV 2016) with a ResNet-50 backbone as NVIDIA DeepLearningExamples
trains it on COCO (PyTorch/Detection/SSD, src/model.py), built from torch.nn only.

Backbone: torchvision ResNet-50 up to layer3 with layer3's first block at stride 1, so the first
feature map is 1024 x 38 x 38. Five extra blocks (1x1 conv, 3x3 conv; BN, ReLU) give 19, 10, 5,
3, 1. Six 3x3 heads with 4/6/6/6/4/4 default boxes = 8732 boxes, each with 4 offsets and 81 class
scores. Loss (DLE src/model.py Loss): smooth L1 on the matched boxes plus cross-entropy with
3:1 hard-negative mining (two sorts), all shape-static. Matching ground truth to default boxes
runs in DLE's data pipeline, not in the training step, so the batch carries already encoded
targets (8732 boxes each); their values are arbitrary: counting needs only shapes.
"""

import functools

import torch
import torch.nn.functional as F
from torch import nn

from thrifty.workloads.resnet import Bottleneck, resnet50_imagenet

BOXES = 8732  # 38^2*4 + 19^2*6 + 10^2*6 + 5^2*6 + 3^2*4 + 1*4
CLASSES = 81  # 80 COCO classes + background


class SSD300(nn.Module):  # DLE SSD src/model.py SSD300 with ResNet(backbone="resnet50")
    def __init__(self, classes: int = CLASSES) -> None:
        super().__init__()
        resnet = resnet50_imagenet()
        conv4_block1 = list(resnet.layers[2].children())[0]  # the first Bottleneck of stage conv4_x
        downsample = conv4_block1.downsample
        assert isinstance(conv4_block1, Bottleneck) and isinstance(downsample, nn.Sequential)
        conv4_block1.conv2.stride = (1, 1)  # conv1 is 1x1 stride 1 already in v1.5
        downsample_conv = downsample[0]
        assert isinstance(downsample_conv, nn.Conv2d)
        downsample_conv.stride = (1, 1)
        self.feature_extractor = nn.Sequential(resnet.stem, *list(resnet.layers)[:3])
        channels = [1024, 512, 512, 256, 256, 256]
        self.additional = nn.ModuleList()
        for i, (cin, cout, mid) in enumerate(zip(channels[:-1], channels[1:], [256, 256, 128, 128, 128], strict=True)):
            stride, pad = (2, 1) if i < 3 else (1, 0)
            self.additional.append(nn.Sequential(
                nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(inplace=True),
                nn.Conv2d(mid, cout, 3, stride, pad, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True)))
        self.classes = classes
        defaults = [4, 6, 6, 6, 4, 4]
        self.loc = nn.ModuleList(nn.Conv2d(c, n * 4, 3, padding=1) for c, n in zip(channels, defaults, strict=True))
        self.conf = nn.ModuleList(nn.Conv2d(c, n * classes, 3, padding=1) for c, n in zip(channels, defaults, strict=True))

    def forward(self, x):
        features = [self.feature_extractor(x)]
        for block in self.additional:
            features.append(block(features[-1]))
        b = x.shape[0]
        locs = [head(f).view(b, 4, -1) for head, f in zip(self.loc, features, strict=True)]
        confs = [head(f).view(b, self.classes, -1) for head, f in zip(self.conf, features, strict=True)]
        return torch.cat(locs, 2).contiguous(), torch.cat(confs, 2).contiguous()


@functools.lru_cache(maxsize=4)
def _default_boxes(device: str) -> torch.Tensor:  # DLE dboxes300_coco (xywh); a constant buffer
    return torch.ones(1, 4, BOXES, device=device)


def ssd_batch(b: int, device) -> tuple:
    """(images 300x300, (encoded boxes (b, 4, 8732), labels (b, 8732))); values are arbitrary: counting needs only shapes."""
    return torch.zeros(b, 3, 300, 300, device=device), \
        (torch.ones(b, 4, BOXES, device=device), torch.ones(b, BOXES, dtype=torch.long, device=device))


def ssd_loss(outputs, targets) -> torch.Tensor:  # DLE SSD src/model.py Loss.forward
    (ploc, plabel), (gloc, glabel) = outputs, targets
    dboxes = _default_boxes(str(ploc.device))
    mask = glabel > 0
    pos_num = mask.sum(dim=1)
    gxy = 10.0 * (gloc[:, :2] - dboxes[:, :2]) / dboxes[:, 2:]  # scale_xy = 1 / 0.1
    gwh = 5.0 * (gloc[:, 2:] / dboxes[:, 2:]).log()  # scale_wh = 1 / 0.2
    sl1 = F.smooth_l1_loss(ploc, torch.cat((gxy, gwh), dim=1).contiguous(), reduction="none").sum(dim=1)
    sl1 = (mask.float() * sl1).sum(dim=1)
    con = F.cross_entropy(plabel, glabel, reduction="none")
    con_neg = con.masked_fill(mask, 0.0)  # DLE: con_neg = con.clone(); con_neg[mask] = 0
    _, con_idx = con_neg.sort(dim=1, descending=True)
    _, con_rank = con_idx.sort(dim=1)
    neg_mask = con_rank < torch.clamp(3 * pos_num, max=mask.size(1)).unsqueeze(-1)
    closs = (con * (mask + neg_mask).float()).sum(dim=1)
    num_mask = (pos_num > 0).float()
    return ((sl1 + closs) * num_mask / pos_num.float().clamp(min=1e-6)).mean(dim=0)
