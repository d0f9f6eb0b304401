# SPDX-License-Identifier: MIT
"""Weighted aggregation over real gloo processes equals the single-process global-batch gradient."""

import pytest
import torch

from thrifty.train.aggregation import allreduce_mean_gradients, flat_gradient, loss_scale
from thrifty.train.launcher import run_local_workers
from thrifty.train.sampler import GlobalBatchSampler

SPLIT = [3, 9, 5]


def _data():
    generator = torch.Generator().manual_seed(1)
    return (torch.randn(64, 6, generator=generator, dtype=torch.float64),
            torch.randint(0, 3, (64,), generator=generator))


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3)).double()


def _rank_gradient(rank: int, world_size: int) -> list[float]:
    x, y = _data()
    sampler = GlobalBatchSampler(len(y), SPLIT, seed=3)
    idx = sampler.rank_indices(rank, epoch=0, step=1)
    model = _model()
    loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
    (loss * loss_scale(world_size, len(idx), sum(SPLIT))).backward()
    averaged, _ = allreduce_mean_gradients(model)
    assert torch.allclose(averaged, flat_gradient(model))  # written back into .grad
    return averaged.tolist()


@pytest.mark.timeout(120)
def test_unequal_batches_give_the_global_batch_gradient():
    x, y = _data()
    sampler = GlobalBatchSampler(len(y), SPLIT, seed=3)
    idx = torch.cat([sampler.rank_indices(r, 0, 1) for r in range(len(SPLIT))])
    model = _model()
    torch.nn.functional.cross_entropy(model(x[idx]), y[idx]).backward()
    expected = flat_gradient(model)
    results = run_local_workers(_rank_gradient, len(SPLIT), timeout_s=90)
    for rank_result in results:
        assert torch.allclose(torch.tensor(rank_result, dtype=torch.float64), expected, atol=1e-6, rtol=0)
        assert (torch.tensor(rank_result, dtype=torch.float64) - expected).abs().max() < 1e-6


def _failing_rank(rank: int, world_size: int) -> None:
    if rank == 1:
        raise RuntimeError("boom in rank 1")
    torch.distributed.barrier()


@pytest.mark.timeout(120)
def test_a_failing_rank_stops_the_run_with_its_message():
    from thrifty.errors import WorkloadError
    with pytest.raises(WorkloadError, match="rank 1 failed: RuntimeError: boom in rank 1"):
        run_local_workers(_failing_rank, 2, timeout_s=60)


def test_sampler_covers_each_sample_once_per_epoch():
    generator = torch.Generator().manual_seed(0)
    for _ in range(20):
        n = int(torch.randint(1, 5, (1,), generator=generator))
        split = torch.randint(1, 12, (n,), generator=generator).tolist()
        sampler = GlobalBatchSampler(100, split, seed=7)
        seen = torch.cat([sampler.rank_indices(r, 2, s) for s in range(sampler.steps_per_epoch)
                          for r in range(n)])
        assert len(seen) == len(set(seen.tolist())) == sampler.steps_per_epoch * sum(split)
        iterator = sampler.iter_rank(n - 1)
        assert torch.equal(next(iterator), sampler.rank_indices(n - 1, 0, 0))


def _crash_on_exit_rank(rank: int, world_size: int) -> int:
    import atexit
    import os
    import time
    if rank == 1:  # like gloo's threads at interpreter exit: the result is already written
        atexit.register(os.abort)
    else:
        time.sleep(1.0)  # still working when rank 1's process dies
    return rank


@pytest.mark.timeout(120)
def test_a_rank_crashing_after_its_result_does_not_fail_the_run():
    assert run_local_workers(_crash_on_exit_rank, 2, timeout_s=60) == [0, 1]
