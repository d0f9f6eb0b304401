# SPDX-License-Identifier: MIT
"""The training-job protocol every part of thrifty runs: model, data, loss, optimizer, metric.

A batch is either a pair (inputs, targets) or a mapping (a Hugging Face-style dict):
- (inputs, targets): the model is called as model(inputs) for a tensor, model(*inputs) for a
  tuple or list, model(**inputs) for a mapping; the loss is loss_fn(outputs, targets);
- a mapping: the model is called as model(**batch) (labels included, as Hugging Face models take
  them) and the loss is loss_fn(outputs, batch), e.g. `lambda out, batch: out.loss`.
"""

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.utils.data import Dataset, TensorDataset, default_collate

from thrifty.workloads.schedules import Constant, LRSchedule

Batch = tuple[Any, Any] | Mapping[str, Any]


@dataclass(frozen=True)
class Recipe:
    """A published training recipe: `epochs` at global batch `batch` reach the target, and the
    same epochs hold for global batches in [min_batch, max_batch] with the recipe's learning-rate
    scaling. Workloads that time on synthetic data take their steps to target from it."""

    epochs: float
    batch: int
    min_batch: int
    max_batch: int
    source: str

    def steps_to_target(self, global_batch, train_size: int):
        """Steps = epochs x training samples / global batch (epochs constant across the range)."""
        return self.epochs * train_size / global_batch


@dataclass
class Workload:
    """A training job. `evaluate` returns its metric: higher is better (accuracy) unless
    `higher_is_better` is False (perplexity, error rate); every target check honours it.

    make_optimizer receives the parameters and the *global* batch size, so the job decides how its
    learning rate scales with batch size; `lr_schedule` then scales that rate with the run's
    progress in samples (workloads.schedules). loss_fn must return the mean loss over the batch.
    """

    name: str
    make_model: Callable[[], nn.Module]
    train_data: Dataset
    eval_data: Dataset
    loss_fn: Callable[[Any, Any], torch.Tensor]  # (outputs, targets), or (outputs, batch) for a mapping batch
    make_optimizer: Callable[[Iterable[nn.Parameter], int], torch.optim.Optimizer]
    evaluate: Callable[[nn.Module, Dataset], float]
    metric_name: str = "accuracy"
    target_metric: float = 0.9
    default_global_batch: int = 64
    description: str = ""
    recipe: Recipe | None = None  # set when steps to target come from a recipe, not a calibration run
    higher_is_better: bool = True
    lr_schedule: LRSchedule = field(default_factory=Constant)

    @property
    def train_size(self) -> int:
        return len(self.train_data)  # type: ignore[arg-type]  # torch types Dataset without __len__; ours are sized

    def reached(self, metric: float, target: float) -> bool:
        """Whether `metric` meets `target` in this workload's direction."""
        return metric >= target if self.higher_is_better else metric <= target

    def unreachable(self, target: float, label: str) -> str | None:
        """Why `target` is no target (never met, or met at once), where the metric's range is known: thrifty's own accuracy
        (classification_accuracy) is a fraction in [0, 1] (`--target 95` trained to its epoch cap).
        `label`: the workload as the user named it."""
        if self.evaluate is not classification_accuracy or not math.isfinite(target) or 0.0 <= target <= 1.0:
            return None  # a NaN or infinite one is train.config's to refuse
        hint = f" (did you mean {target / 100:g}?)" if 1.0 < target <= 100.0 else ""
        if target < 0.0:
            return f"--target {target:g} is met by any model: {label}'s accuracy is a fraction in [0, 1]"
        return f"--target {target:g} can never be met: {label}'s accuracy is a fraction in [0, 1]{hint}"

    def batch(self, indices: torch.Tensor, device: torch.device | None = None) -> Batch:
        """Gather one batch; TensorDatasets are sliced directly, others collated item by item.
        Data sets that make whole batches (synthetic tensors) make them on `device`."""
        return fetch_batch(self.train_data, indices, device)

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        """The mean loss of `batch` (module docstring: how pairs and mappings reach the model)."""
        if isinstance(batch, Mapping):
            return self.loss_fn(model(**batch), batch)
        inputs, targets = batch
        return self.loss_fn(call_model(model, inputs), targets)


def call_model(model: nn.Module, inputs: Any) -> Any:
    """model(inputs), model(*inputs) for a tuple or list, model(**inputs) for a mapping."""
    if isinstance(inputs, Mapping):
        return model(**inputs)
    if isinstance(inputs, (tuple, list)):
        return model(*inputs)
    return model(inputs)


def fetch_batch(data: Dataset, indices: torch.Tensor, device: torch.device | None = None) -> Batch:
    if hasattr(data, "get_batch"):  # data sets that make a whole batch at once (synthetic tensors)
        return data.get_batch(indices, device=device)
    if isinstance(data, TensorDataset):
        inputs, targets = data.tensors[0], data.tensors[1]
        return inputs[indices], targets[indices]
    return collate([data[int(i)] for i in indices])


def collate(items: list) -> Batch:
    """torch's default_collate, with a pair of (inputs, targets) items kept a tuple."""
    batch = default_collate(items)
    return tuple(batch) if isinstance(batch, list) else batch


def move_batch(batch: Any, device: torch.device) -> Any:
    """`batch` (a tensor, or tuples, lists and mappings of them) on `device`: from pinned memory
    with a non-blocking copy to a GPU, unchanged on the CPU."""
    if isinstance(batch, torch.Tensor):
        if batch.device == device:
            return batch
        if device.type == "cuda" and batch.device.type == "cpu":
            return batch.pin_memory().to(device, non_blocking=True)
        return batch.to(device)
    if isinstance(batch, Mapping):
        return {key: move_batch(value, device) for key, value in batch.items()}
    if isinstance(batch, (tuple, list)):
        return type(batch)(move_batch(item, device) for item in batch)
    return batch


def model_device(model: nn.Module) -> torch.device:
    """Where the model's parameters are (the CPU for a model without any)."""
    return next((p.device for p in model.parameters()), torch.device("cpu"))


def classification_accuracy(model: nn.Module, data: Dataset, batch_size: int = 1024) -> float:
    """Top-1 accuracy of `model` on `data`, in eval mode, without gradients."""
    was_training = model.training
    model.eval()
    device = model_device(model)
    correct, total = 0, 0
    with torch.no_grad():
        for start in range(0, len(data), batch_size):  # type: ignore[arg-type]  # torch types Dataset without __len__; ours are sized
            idx = torch.arange(start, min(start + batch_size, len(data)))  # type: ignore[arg-type]  # torch types Dataset without __len__; ours are sized
            inputs, targets = move_batch(fetch_batch(data, idx, device), device)
            correct += int((call_model(model, inputs).argmax(dim=1) == targets).sum())
            total += len(idx)
    model.train(was_training)
    return correct / max(total, 1)
