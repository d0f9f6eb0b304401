# SPDX-License-Identifier: MIT
"""A user's own workload: lower-is-better metrics, dict (Hugging Face-style) and tuple batches on
the device, a real data set through the prefetching loader, and the dry run that reports a broken
workload in one line before anything long starts."""

import textwrap
from pathlib import Path

import pytest
import torch
from torch.utils.data import Dataset

from thrifty.errors import WorkloadError
from thrifty.train.batches import PrefetchingLoader, needs_loader
from thrifty.train.dryrun import dry_run
from thrifty.train.loop import fresh_state, run_steps, train_to_target
from thrifty.train.runtime import Runtime
from thrifty.workloads import load_workload

# A language-model-like job: perplexity (lower is better) of a bigram model on a repeating token
# stream, and a Hugging Face-style model that takes **batch (labels included) and returns .loss.
DICT_WORKLOAD = '''
import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.data import Dataset

from thrifty.workloads import Workload

VOCAB = 8


class Tokens(Dataset):
    def __init__(self, size):
        self.size = size

    def __len__(self):
        return self.size

    def __getitem__(self, i):
        token = i % VOCAB
        return {"input_ids": torch.tensor(token), "labels": torch.tensor((token + 1) % VOCAB)}


@dataclass
class Output:
    loss: torch.Tensor
    logits: torch.Tensor


class Bigram(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = nn.Embedding(VOCAB, VOCAB)

    def forward(self, input_ids, labels=None):
        logits = self.table(input_ids)
        return Output(nn.functional.cross_entropy(logits, labels), logits)


def perplexity(model, data):
    batch = {k: torch.stack([data[i][k] for i in range(len(data))]).to(model.table.weight.device)
             for k in ("input_ids", "labels")}
    with torch.no_grad():
        return math.exp(float(model(**batch).loss))


OVERRIDES = {}  # the tests break one part at a time


def make_workload():
    settings = dict(name="bigram", make_model=Bigram, train_data=Tokens(256), eval_data=Tokens(64),
                    loss_fn=lambda out, batch: out.loss,
                    make_optimizer=lambda params, b: torch.optim.SGD(params, lr=2.0),
                    evaluate=perplexity, metric_name="perplexity", target_metric=1.5,
                    higher_is_better=False, default_global_batch=32)
    return Workload(**{**settings, **OVERRIDES})
'''

TUPLE_WORKLOAD = '''
import torch
from torch import nn
from torch.utils.data import TensorDataset

from thrifty.workloads import Workload, classification_accuracy


class TwoInputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.left, self.right = nn.Linear(3, 2), nn.Linear(5, 2)

    def forward(self, a, b):
        return self.left(a) + self.right(b)


class Pairs(torch.utils.data.Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(0)
        self.a, self.b = torch.randn(n, 3, generator=g), torch.randn(n, 5, generator=g)
        self.y = (self.a[:, 0] > 0).long()

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return (self.a[i], self.b[i]), self.y[i]


def accuracy(model, data):
    (a, b), y = torch.utils.data.default_collate([data[i] for i in range(len(data))])
    return float((model(a, b).argmax(1) == y).float().mean())


def make_workload():
    return Workload(name="two-inputs", make_model=TwoInputs, train_data=Pairs(128), eval_data=Pairs(32),
                    loss_fn=nn.functional.cross_entropy,
                    make_optimizer=lambda params, b: torch.optim.SGD(params, lr=0.1),
                    evaluate=accuracy, default_global_batch=16)
'''


def _write(tmp_path: Path, name: str, source: str) -> str:
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source))
    return str(path)


def test_a_lower_is_better_target_is_reached_only_when_the_metric_falls_to_it(tmp_path):
    """Perplexity starts near 8 (uniform over 8 tokens) and the target is 1.5. Mutation: every
    check as `metric >= target` (the first evaluation, at perplexity ~8, would count as reached)."""
    workload = load_workload(_write(tmp_path, "bigram", DICT_WORKLOAD))
    assert workload.reached(1.2, 1.5) and not workload.reached(8.0, 1.5)
    result = train_to_target(workload, [32], max_steps=300, eval_every=5)
    first_metric = result.metric_history[0][1]
    assert first_metric > 1.5
    assert result.reached_target and result.final_metric <= 1.5
    assert result.steps > 5  # not at the first evaluation


def test_a_dict_batch_reaches_the_model_as_keyword_arguments_and_is_collated_by_key(tmp_path):
    """Mutation: the batch unpacked as (inputs, targets) (a dict of two keys unpacks its key names)."""
    workload = load_workload(_write(tmp_path, "bigram", DICT_WORKLOAD))
    batch = workload.batch(torch.arange(4))
    assert set(batch) == {"input_ids", "labels"} and batch["input_ids"].tolist() == [0, 1, 2, 3]
    state = fresh_state(workload, [16], loader=PrefetchingLoader(workload.train_data, Runtime(), workers=0))
    start = workload.evaluate(state.model, workload.eval_data)
    run_steps(state, workload, steps=30)
    assert workload.evaluate(state.model, workload.eval_data) < start


def test_tuple_inputs_reach_the_model_as_positional_arguments(tmp_path):
    """Mutation: model(inputs) with the tuple as one argument (TypeError: missing argument b)."""
    workload = load_workload(_write(tmp_path, "pairs", TUPLE_WORKLOAD))
    dry_run(workload)
    state = fresh_state(workload, [16])
    run_steps(state, workload, steps=20)
    assert workload.evaluate(state.model, workload.eval_data) > 0.6


class Squares(Dataset):
    """An item-by-item data set (what files to decode look like to the loader)."""

    def __len__(self) -> int:
        return 40

    def __getitem__(self, i: int):
        return torch.tensor([float(i)]), torch.tensor(i * i)


def test_the_prefetching_loader_gives_the_batches_the_step_asks_for_across_split_changes_and_epochs():
    """Two worker processes prepare the next batches at the current split. Mutation: the planned
    batch returned without checking it is the one asked for (a new split would get old samples)."""
    workload = load_workload("builtin:digits")
    workload.train_data = Squares()
    assert needs_loader(workload.train_data)
    loaders = [PrefetchingLoader(workload.train_data, Runtime(), workers=2, depth=3) for _ in range(2)]
    state = fresh_state(workload, [4, 4])  # one sampler, one loader per rank (as each rank has)
    for step in range(12):  # 40 samples / 8 = 5 steps an epoch: two epoch boundaries
        if step == 3:
            state.policy.split = [6, 2]  # the controller moved two samples to rank 0
        for rank, loader in enumerate(loaders):
            indices = state.indices(rank)
            inputs, targets = loader.get(indices, lambda count, rank=rank: state.upcoming(rank, count))
            assert inputs[:, 0].long().tolist() == indices.tolist()
            assert targets.tolist() == (indices * indices).tolist()
        state.advance(0.0)
    # planned anew only at the start, after the split change and at the two epoch boundaries
    assert [loader.restarts for loader in loaders] == [4, 4]


@pytest.mark.parametrize("broken, part", [
    ("evaluate=lambda model, data: 1 / 0", "evaluate failed on a dry run: ZeroDivisionError"),
    ("evaluate=lambda model, data: float('nan')", "evaluate must return a finite number"),
    ("loss_fn=lambda out, batch: out.logits", "loss_fn must return a scalar tensor"),
    ("lr_schedule=lambda seen, total: -1.0", "lr_schedule must return a finite factor >= 0"),
])
def test_a_broken_workload_fails_the_dry_run_in_one_line_naming_the_part(tmp_path, broken, part):
    """Mutations: a dry run that skips evaluate, the loss check or the schedule check."""
    with pytest.raises(WorkloadError, match=part):
        dry_run(load_workload(_write(tmp_path, "broken", _override(broken))))


def _override(assignment: str) -> str:
    """The dict workload's file with one Workload argument replaced."""
    return DICT_WORKLOAD + f"\nOVERRIDES = dict({assignment})\n"


def test_thrifty_train_reports_a_broken_evaluate_in_one_line_with_exit_code_2_before_training(
        run_cli, tmp_path):
    """Mutation: no dry run before the launch (the failure comes as a rank's traceback, later)."""
    workload_file = _write(tmp_path, "broken", _override("evaluate=lambda model, data: 1 / 0"))
    code, out, err = run_cli("train", "--workload", workload_file, "--nproc", "1", "--steps", "5",
                             "--run-dir", tmp_path / "run", "--db", tmp_path / "t.db")
    assert code == 2
    assert err.strip().count("\n") == 0 and "evaluate failed on a dry run: ZeroDivisionError" in err
    assert not (tmp_path / "run" / "steps.csv").exists()  # nothing trained


def test_every_builtin_passes_the_dry_run():
    """Mutation: a dry-run check stricter than the workload protocol (e.g. a float type check
    that refuses an int metric) fails a built-in."""
    for name in ("digits", "digits-bn", "tabular", "resnet18-cifar10"):
        dry_run(load_workload(f"builtin:{name}"))
