# SPDX-License-Identifier: MIT
"""Integer split of a global batch B among n ranks: proportional to weights, within bounds, summing
to B exactly. Pure Python, no torch: the controller and its tests run on a simulated clock."""

from collections.abc import Sequence
from typing import Protocol

from thrifty.errors import ThriftyError


class SplitError(ThriftyError):
    """A global batch that cannot be split under the given bounds."""


class SplitPolicy(Protocol):
    """What the loop asks of a batch policy (train.policies.BatchPolicy, or FixedSplit): the split
    of the global batch among the ranks, and a look at every step's compute times (True: it changed)."""

    split: list[int]
    adjustments: int

    @property
    def global_batch(self) -> int: ...

    def observe(self, step: int, compute_times: Sequence[float]) -> bool: ...


def check_split_bounds(global_batch: int, workers: int, b_min: int, b_max: Sequence[int]) -> None:
    """Raise SplitError unless n * b_min <= B <= sum(b_max) with 1 <= b_min <= B / n."""
    if workers < 1:
        raise SplitError(f"need at least one worker, got {workers}")
    if global_batch < workers:
        raise SplitError(f"global batch {global_batch} is smaller than the {workers} workers")
    if b_min < 1:
        raise SplitError(f"b_min must be at least 1, got {b_min}")
    if b_min * workers > global_batch:
        raise SplitError(f"b_min {b_min} is larger than B / n = {global_batch}/{workers}")
    if len(b_max) != workers:
        raise SplitError(f"{len(b_max)} b_max values for {workers} workers")
    if any(m < b_min for m in b_max):
        raise SplitError(f"b_max {list(b_max)} is below b_min {b_min}")
    if sum(b_max) < global_batch:
        raise SplitError(f"global batch {global_batch} does not fit: the workers' b_max add up to "
                         f"{sum(b_max)}")


def proportional_split(weights: Sequence[float], global_batch: int, b_min: int,
                       b_max: Sequence[int]) -> list[int]:
    """b_k proportional to weights[k], clamped to [b_min, b_max[k]], integers summing to B.

    Clamped ranks are fixed at their bound and the rest re-shared (water filling); the remaining
    fractions go by the largest-remainder method (Hamilton), ties to the lower rank.
    """
    n = len(weights)
    check_split_bounds(global_batch, n, b_min, b_max)
    if any(not (w > 0) for w in weights):
        raise SplitError(f"split weights must be positive, got {list(weights)}")
    real = [0.0] * n
    free = set(range(n))
    remaining = float(global_batch)
    while free:
        total = sum(weights[k] for k in free)
        share = {k: remaining * weights[k] / total for k in free}
        low = {k for k in free if share[k] < b_min}
        high = {k for k in free if share[k] > b_max[k]}
        if not low and not high:
            for k in free:
                real[k] = share[k]
            break
        for k in low:
            real[k] = float(b_min)
        for k in high:
            real[k] = float(b_max[k])
        remaining -= sum(real[k] for k in low | high)
        free -= low | high
    split = [max(b_min, min(int(r), b_max[k])) for k, r in enumerate(real)]
    order = sorted(range(n), key=lambda k: (-(real[k] - int(real[k])), k))
    while sum(split) < global_batch:  # hand out the remainder, largest fraction first
        k = next(k for k in order if split[k] < b_max[k])
        split[k] += 1
        order.remove(k)
        order.append(k)
    while sum(split) > global_batch:  # only after clamping up to b_min; take from the largest
        k = max((k for k in range(n) if split[k] > b_min), key=lambda k: (split[k] - real[k], split[k]))
        split[k] -= 1
    return split


def affine_targets(fixed: Sequence[float], slopes: Sequence[float], global_batch: int, b_min: int,
                   b_max: Sequence[int]) -> list[float]:
    """Real batches that equalise predicted compute times t_k(b) = slope_k (fixed_k + b) with
    sum b_k = B in one move, clamped to [b_min, b_max[k]]: with the free ranks F sharing
    R = B - (clamped batches), T = (R + sum_F fixed_k) / sum_F (1 / slope_k) and
    b_k = T / slope_k - fixed_k (solve sum_F (T / slope_k - fixed_k) = R); ranks out of bounds are
    fixed at the bound and the rest re-solved (water filling). fixed_k = 0 is the proportional
    split b_k ~ b_k / t_k. `fixed` is in samples (a_k / c_k of t_k = a_k + c_k b_k)."""
    n = len(slopes)
    check_split_bounds(global_batch, n, b_min, b_max)
    if any(not (s > 0) for s in slopes) or any(not (h >= 0) for h in fixed):
        raise SplitError(f"need positive slopes and non-negative fixed costs, got {list(slopes)}, {list(fixed)}")
    target = [0.0] * n
    free = set(range(n))
    remaining = float(global_batch)
    while free:
        time = (remaining + sum(fixed[k] for k in free)) / sum(1.0 / slopes[k] for k in free)
        share = {k: time / slopes[k] - fixed[k] for k in free}
        low = {k for k in free if share[k] < b_min}
        high = {k for k in free if share[k] > b_max[k]}
        if not low and not high:
            for k in free:
                target[k] = share[k]
            break
        for k in low:  # clamping the low ranks first raises T, which can only free high ones later
            target[k] = float(b_min)
        remaining -= b_min * len(low)
        free -= low
        if not low:
            for k in high:
                target[k] = float(b_max[k])
            remaining -= sum(b_max[k] for k in high)
            free -= high
    return target


def even_split(global_batch: int, workers: int) -> list[int]:
    """B / n each, the remainder to the first ranks."""
    base, extra = divmod(global_batch, workers)
    return [base + (1 if k < extra else 0) for k in range(workers)]
