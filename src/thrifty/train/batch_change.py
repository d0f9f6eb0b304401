# SPDX-License-Identifier: MIT
"""A rank's side of an in-place batch change (train.batch_requests): whether the run can take a
request now, and taking it."""

import math
from collections.abc import Sequence

from thrifty.train.batch_requests import BatchRequest
from thrifty.train.checkpoint import adopt_hyperparameters
from thrifty.train.loop import RankState
from thrifty.train.policies import BatchPolicy, make_policy
from thrifty.train.sampler import GlobalBatchSampler
from thrifty.train.split import SplitError, check_split_bounds
from thrifty.workloads.base import Workload


def refusal(state: RankState, request: BatchRequest, last_step: int) -> str | None:
    """Why the run cannot take `request` now (one line), or None. Every rank reaches the same answer
    from the same state."""
    policy, sampler = state.policy, state.batch_sampler()
    if not isinstance(policy, BatchPolicy):
        return "this run's split is fixed (profiling, calibration)"
    if request.global_batch > sampler.dataset_size:
        return f"global batch {request.global_batch} exceeds the training set ({sampler.dataset_size})"
    try:
        check_split_bounds(request.global_batch, len(policy.split), policy.b_min, policy.b_max)
    except SplitError as exc:
        return str(exc)
    if state.step >= last_step:
        return f"the run is at its last step ({state.step})"
    if request.steps is not None and request.steps <= state.step:
        return f"steps {request.steps} is not beyond the current step {state.step}"
    return None


def change_in_place(state: RankState, workload: Workload, request: BatchRequest,
                    capacities: Sequence[float] | None) -> int:
    """Train on at `request.global_batch` from the next step (train.batch_requests says what
    changes); the run's new last step. Call `refusal` first."""
    old, new = state.policy, request.global_batch
    if not isinstance(old, BatchPolicy):
        raise TypeError("a fixed split takes no batch change (refusal says so)")
    steps = request.steps
    if steps is None:  # the samples still to train, in steps of the new batch
        steps = state.step + max(1, math.ceil((state.total_samples - state.samples_seen) / new))
    if new != old.global_batch:  # the same batch: the run's last step alone moves
        state.policy = make_policy(old.name, new, len(old.split), b_min=old.b_min, b_max=old.b_max,
                                   capacities=capacities, settings=old.settings)
        sampler = state.batch_sampler()
        state.sampler = GlobalBatchSampler(sampler.dataset_size, state.policy.split, seed=sampler.seed)
        state.end_epoch_if_done()  # the new B may not fit in what is left of the epoch
        if state.optimizer is not None:
            fresh = workload.make_optimizer(state.model.parameters(), new)
            adopt_hyperparameters(state.optimizer, fresh.param_groups)
            state.base_lrs = [group["lr"] for group in fresh.param_groups]
    state.total_samples = float(state.samples_seen + (steps - state.step) * new)
    return steps
