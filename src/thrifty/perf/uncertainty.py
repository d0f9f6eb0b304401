# SPDX-License-Identifier: MIT
"""What a profile cannot see about its own error: the spread between launches, the distance to the
configurations it measured, and a busy machine. Constants with their sources; pure numpy.

  launch    sd of log step time between repeated runs of one setting, pooled over settings:
            s^2 = mean over settings of var(log run means)   (unbiased sample variance per setting)
  distance  d = min over profiled configurations of || log2 (nodes, workers, local batch) - log2 c ||
  busy      with `others` runnable tasks beside the profile on `cores` cores, a CPU-bound step may
            have got cores / (cores + others) of its share: the quiet time is at most that factor
            lower, so the 90% interval reaches it: sd = log(1 + others / cores) / z_0.95
"""

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy.special import ndtri

# bench_steptime (README, results): on this 2-core machine one configuration moved by up to 26%
# between 3 launches of 12 configurations; the largest of 12 ranges of 3 normal draws is about
# 2.9 sd, so sd ~ 0.26 / 2.9 = 0.09 in log step time.
LAUNCH_SIGMA_LOG_FLOOR = 0.09
# bench_steptime: fits of 6 configurations predicted the other 6 with MdAPE 3.2-5.2%; a median
# absolute error is 0.674 sd, so sd ~ 0.052 / 0.674 = 0.08: what an exact fit, whose residuals are
# zero, is given instead of its residual scatter.
EXACT_FIT_SIGMA_LOG = 0.08
# A fit of no more samples than free parameters is exact only where it passes through them: every
# residual within about 1% (a new user's pass: bounded parameters left 8 samples off by up to 2x, and
# the fit was called exact, its intervals too narrow to hold them)
EXACT_RESIDUAL_LOG = 0.01
# Our stated assumption (no multi-node or many-worker profiles to calibrate it on): each doubling of
# nodes, workers or local batch away from the nearest profiled configuration adds a deviation of
# 0.10 in log step time (x/÷1.18 at 90%), since the terms there were fixed, not fitted.
EXTRAPOLATION_SIGMA_LOG_PER_DOUBLING = 0.10
# A kind of network (several ranks inside one node, or several nodes) that no sample showed is a
# guess: its sync time is uncertain by UNSEEN_NETWORK_SIGMA_LOG in log (x/÷5 at 90%: a GPU link
# and a NIC differ by 7x-200x in the bundled catalog, a node's PCIe and its NIC by 2x and more),
# which moves log T by about that times the sync's share of the step, taken as at least
# UNSEEN_SYNC_SHARE (a guessed sync may be far too small: with no multi-rank sample the fit guesses
# 1 ms). Used by perf.steptime's intervals and search.belief's.
UNSEEN_NETWORK_SIGMA_LOG = 1.0
UNSEEN_SYNC_SHARE = 0.5
Z90 = float(ndtri(0.95))


def doublings_away(profiled: np.ndarray, nodes, workers, local_batch) -> np.ndarray:
    """Distance in doublings from each configuration to the nearest of `profiled` (k x 3)."""
    points = np.log2(np.stack(np.broadcast_arrays(*(np.asarray(x, float) for x in (nodes, workers, local_batch))),
                              axis=-1))
    gaps = points[..., None, :] - np.log2(np.asarray(profiled, float))
    return np.sqrt(np.sum(gaps**2, axis=-1)).min(axis=-1)


def launch_sigma_log(run_means_s: Mapping[Any, Sequence[float]]) -> float:
    """Pooled sd of log run means over settings with at least two runs; 0 when none has two."""
    variances = [float(np.var(np.log(np.asarray(runs, float)), ddof=1))
                 for runs in run_means_s.values() if len(runs) >= 2]
    return math.sqrt(float(np.mean(variances))) if variances else 0.0


def readings_busy(machine: Mapping) -> bool:
    """Whether a profile's machine readings (train.busy's, before and during it) said busy; a profile
    stored without them: False."""
    return any(machine.get(when, {}).get("busy", False) for when in ("before", "during"))


def busy_sigma_log(others_load: float, cores: int) -> float:
    """sd of log step time that covers a quiet machine from a profile with `others_load` runnable
    tasks beside it (module docstring)."""
    return math.log1p(max(others_load, 0.0) / max(cores, 1)) / Z90


def relative_spread(run_means_s: Mapping[Any, Sequence[float]]) -> float:
    """Median over settings of (largest - smallest) / smallest run mean: how much runs of one
    setting differ (0 when no setting has two runs)."""
    spreads = [max(runs) / min(runs) - 1.0 for runs in run_means_s.values() if len(runs) >= 2]
    return float(np.median(spreads)) if spreads else 0.0
