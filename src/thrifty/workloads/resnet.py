# SPDX-License-Identifier: MIT
"""ResNet models as the field uses them, written out so no download or extra package is needed.

- `resnet18_cifar`: the CIFAR variant of ResNet-18 from the common pytorch-cifar recipe
  (github.com/kuangliu/pytorch-cifar, models/resnet.py): 3x3 stem convolution, no max-pool,
  BasicBlocks [2, 2, 2, 2], 11,173,962 parameters for 10 classes.
- `resnet50_imagenet`: torchvision's ResNet-50 (torchvision/models/resnet.py, v1.5: stride on the
  3x3 convolution of each Bottleneck), 25,557,032 parameters for 1000 classes.
He et al., "Deep Residual Learning for Image Recognition", CVPR 2016.
"""

from torch import nn


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, in_planes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(nn.Conv2d(in_planes, planes, 1, stride, bias=False),
                                          nn.BatchNorm2d(planes))
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + self.shortcut(x))


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, in_planes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        width = planes
        self.conv1 = nn.Conv2d(in_planes, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)  # v1.5: stride here
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or in_planes != planes * 4:
            self.downsample = nn.Sequential(nn.Conv2d(in_planes, planes * 4, 1, stride, bias=False),
                                            nn.BatchNorm2d(planes * 4))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    def __init__(self, block, layers: list[int], num_classes: int, *, cifar_stem: bool) -> None:
        super().__init__()
        self.in_planes = 64
        if cifar_stem:  # 3x3 stride-1 stem, no max-pool (pytorch-cifar)
            self.stem = nn.Sequential(nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64),
                                      nn.ReLU(inplace=True))
        else:  # 7x7 stride-2 stem and 3x3 max-pool (torchvision)
            self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64),
                                      nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1))
        self.layers = nn.Sequential(*(self._stage(block, planes, blocks, 1 if i == 0 else 2)
                                      for i, (planes, blocks) in enumerate(zip((64, 128, 256, 512), layers, strict=True))))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512 * block.expansion, num_classes)

    def _stage(self, block, planes: int, blocks: int, stride: int) -> nn.Sequential:
        modules = []
        for s in [stride] + [1] * (blocks - 1):
            modules.append(block(self.in_planes, planes, s))
            self.in_planes = planes * block.expansion
        return nn.Sequential(*modules)

    def forward(self, x):
        return self.fc(self.pool(self.layers(self.stem(x))).flatten(1))


def resnet18_cifar(num_classes: int = 10) -> ResNet:
    return ResNet(BasicBlock, [2, 2, 2, 2], num_classes, cifar_stem=True)


def resnet50_imagenet(num_classes: int = 1000) -> ResNet:
    return ResNet(Bottleneck, [3, 4, 6, 3], num_classes, cifar_stem=False)
