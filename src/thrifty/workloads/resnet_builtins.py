# SPDX-License-Identifier: MIT
"""Built-ins a user recognises: ResNet-18 on CIFAR-10 and ResNet-50 on ImageNet.

They time on synthetic tensors of the real shape and training-set size (no download) and take
their steps to target from the published recipe (workloads.base.Recipe), not from a calibration
run: synthetic labels cannot reach a real accuracy. Their `evaluate` reports accuracy on synthetic
data, which only shows that training runs.
"""


import torch
from torch import nn

from thrifty.workloads.base import Recipe, Workload, classification_accuracy
from thrifty.workloads.resnet import resnet18_cifar, resnet50_imagenet
from thrifty.workloads.schedules import Cosine, LRSchedule, Step, Warmup
from thrifty.workloads.synthetic import SyntheticImages

# kuangliu/pytorch-cifar README and main.py: SGD lr 0.1, momentum 0.9, weight decay 5e-4, cosine
# schedule over 200 epochs at batch 128 -> 93.02% test accuracy for ResNet18. Same epochs for other
# batches with linear learning-rate scaling (Goyal et al. 2017, arXiv:1706.02677, showed it for
# ImageNet up to 8192); the range 32-1024 for CIFAR-10 is our assumption, not a measurement.
CIFAR_RECIPE = Recipe(epochs=200, batch=128, min_batch=32, max_batch=1024,
                      source="kuangliu/pytorch-cifar: 200 epochs at batch 128 -> 93.02% (ResNet18); "
                             "linear LR scaling assumed for 32-1024")
# Goyal et al. 2017: ResNet-50 reaches 76.3% top-1 in 90 epochs for global batches 256 to 8192
# with linear learning-rate scaling and a 5-epoch warm-up (Table 2a, Figure 1).
IMAGENET_RECIPE = Recipe(epochs=90, batch=256, min_batch=64, max_batch=8192,
                         source="Goyal et al. 2017 (arXiv:1706.02677): 90 epochs -> 76.3% top-1 "
                                "for batches 256-8192")
# pytorch-cifar main.py: CosineAnnealingLR(T_max=200) over its 200 epochs = cosine to 0 over the run.
CIFAR_SCHEDULE = Cosine()
# Goyal et al. 2017, section 2.2 and 5.1: linear warm-up over the first 5 epochs (from the batch-256
# rate, 0.1 of a batch-2560 one; we start at 0.1 at every B), then /10 at epochs 30, 60 and 80 of 90.
IMAGENET_TRAIN_SIZE = 1_281_167
IMAGENET_SCHEDULE = Warmup(samples=5 * IMAGENET_TRAIN_SIZE, start=0.1,
                           after=Step(milestones=(30 / 90, 60 / 90, 80 / 90), gamma=0.1))


def _sgd(base_lr: float, base_batch: int, weight_decay: float):
    def make(params, global_batch: int) -> torch.optim.Optimizer:
        # Linear scaling rule (Goyal et al. 2017): lr = base_lr * B / base_batch.
        return torch.optim.SGD(params, lr=base_lr * global_batch / base_batch, momentum=0.9,
                               weight_decay=weight_decay)
    return make


def _synthetic_image_workload(name: str, make_model, train_size: int, shape: tuple[int, int, int],
                              classes: int, recipe: Recipe, weight_decay: float, target: float,
                              schedule: LRSchedule, description: str) -> Workload:
    return Workload(
        name=name, make_model=make_model,
        train_data=SyntheticImages(train_size, shape, classes, seed=0),
        eval_data=SyntheticImages(512 if shape[1] < 64 else 64, shape, classes, seed=1),
        loss_fn=nn.functional.cross_entropy, make_optimizer=_sgd(0.1, recipe.batch, weight_decay),
        evaluate=classification_accuracy, target_metric=target, default_global_batch=recipe.batch,
        description=description, recipe=recipe, lr_schedule=schedule)


def make_cifar10() -> Workload:
    return _synthetic_image_workload(
        "resnet18-cifar10", resnet18_cifar, 50_000, (3, 32, 32), 10, CIFAR_RECIPE, 5e-4, 0.93, CIFAR_SCHEDULE,
        "ResNet-18 (CIFAR variant, 11.2M parameters) on CIFAR-10-shaped synthetic data "
        "(50,000 x 3x32x32, 10 classes); steps from the pytorch-cifar recipe")


def make_imagenet() -> Workload:
    return _synthetic_image_workload(
        "resnet50-imagenet", resnet50_imagenet, IMAGENET_TRAIN_SIZE, (3, 224, 224), 1000, IMAGENET_RECIPE, 1e-4, 0.76,
        IMAGENET_SCHEDULE,
        "torchvision ResNet-50 (25.6M parameters) on ImageNet-shaped synthetic data "
        "(1,281,167 x 3x224x224, 1000 classes); steps from Goyal et al.'s 90-epoch recipe")
