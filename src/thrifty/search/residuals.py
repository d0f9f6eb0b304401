# SPDX-License-Identifier: MIT
"""Correlated model error: a Gaussian process on the log residuals of the measured configurations.

The step-time model is smooth; real traces are not (a memory cliff, a slow sync mode). Errors of
neighbouring configurations are alike, so a measured configuration should also correct and
sharpen the prediction of its neighbours. Model + GP on residuals (Kennedy & O'Hagan 2001,
"Bayesian calibration of computer models"; the posterior is Rasmussen & Williams 2006, eq. 2.25-26):

    r_j = log measured_j - log model_j,   k(c, c') = s^2 exp(-|f - f'|^2 / (2 l^2)) (rho if types differ)
    mean(c) = k_c^T (K + D)^-1 r,   var(c) = s^2 - k_c^T (K + D)^-1 k_c

with features f = (log2 local batch, log2 nodes, log2 workers per node), D the measured means'
squared relative standard errors, s the misspecification sd, l one doubling, rho = 0.5.
"""

from collections.abc import Sequence

import numpy as np

from thrifty.search.config import Config

LENGTH_SCALE = 1.0  # in doublings of local batch, nodes or workers per node
CROSS_TYPE = 0.5  # correlation of the model's errors between two VM types at the same shape


def _features(configs: Sequence[Config]) -> np.ndarray:
    return np.log2([[c.local_batch, c.num_nodes, c.num_workers / c.num_nodes] for c in configs])


def _kernel(a: Sequence[Config], b: Sequence[Config], scale_sd: float) -> np.ndarray:
    fa, fb = _features(a), _features(b)
    distance2 = np.sum((fa[:, None, :] - fb[None, :, :]) ** 2, axis=-1)
    same = np.equal.outer([c.instance_type for c in a], [c.instance_type for c in b])
    return scale_sd**2 * np.exp(-distance2 / (2 * LENGTH_SCALE**2)) * np.where(same, 1.0, CROSS_TYPE)


def krige(measured: Sequence[Config], residuals: np.ndarray, noise_sd: np.ndarray,
          targets: Sequence[Config], scale_sd: float) -> tuple[np.ndarray, np.ndarray]:
    """(mean, sd) of the model's log error at `targets`, given residuals at `measured`."""
    if not measured or not targets:
        return np.zeros(len(targets)), np.full(len(targets), scale_sd)
    gram = _kernel(measured, measured, scale_sd) + np.diag(np.asarray(noise_sd, float) ** 2 + 1e-10)
    cross = _kernel(targets, measured, scale_sd)
    mean = cross @ np.linalg.solve(gram, residuals)
    variance = scale_sd**2 - np.sum(cross * np.linalg.solve(gram, cross.T).T, axis=1)
    return mean, np.sqrt(np.maximum(variance, 0.0))
