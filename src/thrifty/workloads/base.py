"""The training-job protocol every part of thrifty runs: model, data, loss, optimizer, metric."""

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.data import Dataset, TensorDataset, default_collate

Batch = tuple[torch.Tensor, torch.Tensor]


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
    """A training job. `evaluate` returns a metric where higher is better (e.g. accuracy).

    make_optimizer receives the parameters and the *global* batch size, so the job decides how its
    learning rate scales with batch size. loss_fn must return the mean loss over the batch.
    """

    name: str
    make_model: Callable[[], nn.Module]
    train_data: Dataset
    eval_data: Dataset
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    make_optimizer: Callable[[Iterable[nn.Parameter], int], torch.optim.Optimizer]
    evaluate: Callable[[nn.Module, Dataset], float]
    metric_name: str = "accuracy"
    target_metric: float = 0.9
    default_global_batch: int = 64
    description: str = ""
    recipe: Recipe | None = None  # set when steps to target come from a recipe, not a calibration run

    @property
    def train_size(self) -> int:
        return len(self.train_data)  # type: ignore[arg-type]

    def batch(self, indices: torch.Tensor) -> Batch:
        """Gather one batch; TensorDatasets are sliced directly, others collated item by item."""
        return fetch_batch(self.train_data, indices)


def fetch_batch(data: Dataset, indices: torch.Tensor) -> Batch:
    if hasattr(data, "get_batch"):  # data sets that make a whole batch at once (synthetic tensors)
        return data.get_batch(indices)
    if isinstance(data, TensorDataset):
        inputs, targets = data.tensors[0], data.tensors[1]
        return inputs[indices], targets[indices]
    items = [data[int(i)] for i in indices]
    inputs, targets = default_collate(items)
    return inputs, targets


def classification_accuracy(model: nn.Module, data: Dataset, batch_size: int = 1024) -> float:
    """Top-1 accuracy of `model` on `data`, in eval mode, without gradients."""
    was_training = model.training
    model.eval()
    correct, total = 0, 0
    with torch.no_grad():
        for start in range(0, len(data), batch_size):  # type: ignore[arg-type]
            idx = torch.arange(start, min(start + batch_size, len(data)))  # type: ignore[arg-type]
            inputs, targets = fetch_batch(data, idx)
            correct += int((model(inputs).argmax(dim=1) == targets).sum())
            total += len(idx)
    model.train(was_training)
    return correct / max(total, 1)
