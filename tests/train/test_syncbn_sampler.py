# SPDX-License-Identifier: MIT
"""Count-weighted SyncBatchNorm over unequal local batches, and sampler coverage for any splits."""

import random

import pytest
import torch

from thrifty.train.aggregation import allreduce_mean_gradients, flat_gradient, loss_scale
from thrifty.train.launcher import run_local_workers
from thrifty.train.sampler import GlobalBatchSampler
from thrifty.train.split import proportional_split
from thrifty.train.syncbn import CountWeightedSyncBatchNorm, convert_sync_batchnorm

SPLIT = [2, 11, 5]


def _data():
    generator = torch.Generator().manual_seed(4)
    return torch.randn(18, 3, 5, 5, generator=generator, dtype=torch.float64), \
        torch.randint(0, 4, (18,), generator=generator)


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 6, 3), torch.nn.BatchNorm2d(6), torch.nn.ReLU(),
                               torch.nn.Flatten(), torch.nn.Linear(6 * 9, 8), torch.nn.BatchNorm1d(8),
                               torch.nn.ReLU(), torch.nn.Linear(8, 4)).double()


def _rank(rank: int, world_size: int) -> dict:
    x, y = _data()
    start = sum(SPLIT[:rank])
    idx = torch.arange(start, start + SPLIT[rank])
    model = convert_sync_batchnorm(_model())
    out = model(x[idx])
    loss = torch.nn.functional.cross_entropy(out, y[idx])
    (loss * loss_scale(world_size, len(idx), sum(SPLIT))).backward()
    averaged, _ = allreduce_mean_gradients(model)
    bn = model[1]
    return {"grad": averaged.tolist(), "out": out.detach().tolist(),
            "running_mean": bn.running_mean.tolist(), "running_var": bn.running_var.tolist()}


@pytest.mark.timeout(120)
def test_sync_batchnorm_equals_batchnorm_over_the_global_batch():
    x, y = _data()
    model = _model()
    out = model(x)
    torch.nn.functional.cross_entropy(out, y).backward()
    expected = flat_gradient(model)
    results = run_local_workers(_rank, len(SPLIT), timeout_s=90)
    for rank, result in enumerate(results):
        start = sum(SPLIT[:rank])
        assert (torch.tensor(result["grad"], dtype=torch.float64) - expected).abs().max() < 1e-6
        mine = out[start:start + SPLIT[rank]].detach()
        assert (torch.tensor(result["out"], dtype=torch.float64) - mine).abs().max() < 1e-6
        assert torch.allclose(torch.tensor(result["running_mean"], dtype=torch.float64), model[1].running_mean)
        assert torch.allclose(torch.tensor(result["running_var"], dtype=torch.float64), model[1].running_var)


def test_single_process_sync_batchnorm_is_plain_batchnorm():
    plain = torch.nn.BatchNorm1d(4)
    sync = convert_sync_batchnorm(torch.nn.Sequential(torch.nn.BatchNorm1d(4)))[0]
    assert isinstance(sync, CountWeightedSyncBatchNorm)
    x = torch.randn(10, 4)
    assert torch.allclose(plain(x), sync(x))


def test_any_sequence_of_splits_covers_each_sample_once_per_epoch():
    rng = random.Random(5)
    for trial in range(20):
        n, size = rng.randint(1, 6), rng.randint(50, 400)
        batch = rng.randint(n, size // 2)
        sampler = GlobalBatchSampler(size, proportional_split([1.0] * n, batch, 1, [batch] * n), seed=trial)
        for epoch in range(2):
            seen = []
            for step in range(sampler.steps_per_epoch):
                split = proportional_split([rng.uniform(0.1, 5) for _ in range(n)], batch, 1, [batch] * n)
                parts = [sampler.split_indices(k, epoch, step, split) for k in range(n)]
                assert [len(p) for p in parts] == split
                seen += torch.cat(parts).tolist()
            assert len(seen) == len(set(seen)) == sampler.steps_per_epoch * batch
        again = GlobalBatchSampler(size, sampler.local_batches, seed=trial)
        assert torch.equal(again.epoch_order(1), sampler.epoch_order(1))  # deterministic


def test_split_must_add_up_to_the_global_batch():
    sampler = GlobalBatchSampler(100, [5, 5])
    with pytest.raises(ValueError, match="does not add up"):
        sampler.split_indices(0, 0, 0, [4, 5])
