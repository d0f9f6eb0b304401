# SPDX-License-Identifier: MIT
"""A small MLP whose loss is summed over 256 "tokens" (256 x the mean cross-entropy), so its
float16 gradients overflow at amp's default loss scale of 2^16 and the scaler backs off, with a
warm-up + cosine learning-rate schedule: a run that needs the loss scaler's state and the
schedule's position to resume exactly. Loaded by path (make_workload) by the tests."""

import torch
from torch import nn
from torch.utils.data import TensorDataset

from thrifty.workloads import Workload, classification_accuracy
from thrifty.workloads.schedules import Cosine, Warmup

TOKENS = 256


def _model() -> nn.Module:
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))


def _loss(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return TOKENS * nn.functional.cross_entropy(outputs, targets)


def make_workload() -> Workload:
    generator = torch.Generator().manual_seed(0)
    features = torch.randn(512, 8, generator=generator)
    labels = (features[:, 0] > 0).long()
    return Workload(
        name="scaled-mlp", make_model=_model,
        train_data=TensorDataset(features[:384], labels[:384]), eval_data=TensorDataset(features[384:], labels[384:]),
        loss_fn=_loss,
        make_optimizer=lambda params, batch: torch.optim.SGD(params, lr=0.05 / TOKENS * batch / 32, momentum=0.9),
        evaluate=classification_accuracy, target_metric=0.99, default_global_batch=32,
        lr_schedule=Warmup(samples=320, start=0.1, after=Cosine()))
