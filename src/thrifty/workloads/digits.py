# SPDX-License-Identifier: MIT
"""Built-in `digits`: a small CNN on the UCI handwritten digits (optdigits, 1,797 8x8 images,
shipped in the package, so it runs offline). Target: 95% test accuracy.

`digits-bn` is the same job with BatchNorm after each convolution: the built-in that runs the
count-weighted synchronised BatchNorm (thrifty.train.syncbn) end to end."""

import math

import torch
from torch import nn
from torch.utils.data import TensorDataset

from thrifty.workloads import datasets
from thrifty.workloads.base import Workload, classification_accuracy
from thrifty.workloads.splits import train_test_split_indices

BASE_BATCH = 32
BASE_LR = 0.05


def _model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 4 * 4, 128), nn.ReLU(), nn.Linear(128, 10))


def _bn_model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
        nn.Conv2d(32, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 4 * 4, 128), nn.ReLU(), nn.Linear(128, 10))


def _optimizer(params, global_batch: int) -> torch.optim.Optimizer:
    # Square-root learning-rate scaling with batch size (Krizhevsky 2014; Hoffer et al. 2017).
    lr = BASE_LR * math.sqrt(global_batch / BASE_BATCH)
    return torch.optim.SGD(params, lr=min(lr, 0.4), momentum=0.9)


def make_workload() -> Workload:
    pixels, digits = datasets.digits()
    images = torch.tensor(pixels / 16.0, dtype=torch.float32).unsqueeze(1)
    labels = torch.tensor(digits, dtype=torch.long)
    train_idx, test_idx = train_test_split_indices(len(labels), test_fraction=0.2, seed=0)
    return Workload(
        name="digits",
        make_model=_model,
        train_data=TensorDataset(images[train_idx], labels[train_idx]),
        eval_data=TensorDataset(images[test_idx], labels[test_idx]),
        loss_fn=nn.functional.cross_entropy,
        make_optimizer=_optimizer,
        evaluate=classification_accuracy,
        metric_name="accuracy",
        target_metric=0.95,
        default_global_batch=64,
        description="CNN on the UCI 8x8 handwritten digits (1,437 train / 360 test images)",
    )


def make_bn_workload() -> Workload:
    workload = make_workload()
    workload.name, workload.make_model = "digits-bn", _bn_model
    workload.description = "digits' CNN with BatchNorm after each convolution"
    return workload


__all__ = ["make_bn_workload", "make_workload"]
