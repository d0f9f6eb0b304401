# SPDX-License-Identifier: MIT
"""Built-in `tabular`: an MLP on the Wisconsin diagnostic breast-cancer data set (569 tumours,
30 features; UCI, shipped in the package). Features are standardised with the training split's
mean and deviation. Target: 96% test accuracy."""

import math

import torch
from torch import nn
from torch.utils.data import TensorDataset

from thrifty.workloads import datasets
from thrifty.workloads.base import Workload, classification_accuracy
from thrifty.workloads.splits import train_test_split_indices

BASE_BATCH = 16
BASE_LR = 0.01


def _model() -> nn.Module:
    return nn.Sequential(nn.Linear(30, 64), nn.ReLU(), nn.Dropout(0.1),
                         nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 2))


def _optimizer(params, global_batch: int) -> torch.optim.Optimizer:
    # Square-root learning-rate scaling with batch size (Hoffer et al. 2017) for Adam.
    return torch.optim.Adam(params, lr=BASE_LR * math.sqrt(global_batch / BASE_BATCH))


def make_workload() -> Workload:
    table, classes = datasets.breast_cancer()
    features = torch.tensor(table, dtype=torch.float32)
    labels = torch.tensor(classes, dtype=torch.long)
    train_idx, test_idx = train_test_split_indices(len(labels), test_fraction=0.25, seed=0)
    mean, std = features[train_idx].mean(0), features[train_idx].std(0)
    features = (features - mean) / std
    return Workload(
        name="tabular",
        make_model=_model,
        train_data=TensorDataset(features[train_idx], labels[train_idx]),
        eval_data=TensorDataset(features[test_idx], labels[test_idx]),
        loss_fn=nn.functional.cross_entropy,
        make_optimizer=_optimizer,
        evaluate=classification_accuracy,
        metric_name="accuracy",
        target_metric=0.96,
        default_global_batch=32,
        description="MLP on the Wisconsin breast-cancer table (427 train / 142 test rows)",
    )
