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


def _sgd(base_lr: float, base_batch: int):
    def make(params, global_batch: int) -> torch.optim.Optimizer:
        # Linear scaling rule (Goyal et al. 2017): lr = base_lr * B / base_batch.
        return torch.optim.SGD(params, lr=base_lr * global_batch / base_batch, momentum=0.9,
                               weight_decay=5e-4 if base_batch == 128 else 1e-4)
    return make


def make_cifar10() -> Workload:
    return Workload(
        name="resnet18-cifar10", make_model=resnet18_cifar,
        train_data=SyntheticImages(50_000, (3, 32, 32), 10, seed=0),
        eval_data=SyntheticImages(512, (3, 32, 32), 10, seed=1),
        loss_fn=nn.functional.cross_entropy, make_optimizer=_sgd(0.1, 128),
        evaluate=classification_accuracy, target_metric=0.93, default_global_batch=128,
        description="ResNet-18 (CIFAR variant, 11.2M parameters) on CIFAR-10-shaped synthetic data "
                    "(50,000 x 3x32x32, 10 classes); steps from the pytorch-cifar recipe",
        recipe=CIFAR_RECIPE)


def make_imagenet() -> Workload:
    return Workload(
        name="resnet50-imagenet", make_model=resnet50_imagenet,
        train_data=SyntheticImages(1_281_167, (3, 224, 224), 1000, seed=0),
        eval_data=SyntheticImages(64, (3, 224, 224), 1000, seed=1),
        loss_fn=nn.functional.cross_entropy, make_optimizer=_sgd(0.1, 256),
        evaluate=classification_accuracy, target_metric=0.76, default_global_batch=256,
        description="torchvision ResNet-50 (25.6M parameters) on ImageNet-shaped synthetic data "
                    "(1,281,167 x 3x224x224, 1000 classes); steps from Goyal et al.'s 90-epoch recipe",
        recipe=IMAGENET_RECIPE)


