# SPDX-License-Identifier: MIT
"""Statistical efficiency: how many steps a batch size needs to reach a target.

McCandlish et al. 2018 ("An Empirical Model of Large-Batch Training", eq. 2.11):
  steps     S(B) = S_min (1 + B_noise / B)
  examples  E(B) = E_min (1 + B / B_noise),  E_min = S_min * B_noise
Pollux (Qiao et al., OSDI 2021) efficiency of batch M relative to M0: (phi + M0) / (phi + M).
"""

import numpy as np

from thrifty.errors import ModelError


def steps_to_target(global_batch, s_min: float, noise_scale: float) -> np.ndarray:
    """S(B) = S_min (1 + B_noise / B)  (McCandlish et al. 2018, eq. 2.11)."""
    return s_min * (1.0 + noise_scale / np.asarray(global_batch, float))


def examples_to_target(global_batch, s_min: float, noise_scale: float) -> np.ndarray:
    """E(B) = E_min (1 + B / B_noise) with E_min = S_min B_noise (McCandlish et al. 2018)."""
    return s_min * noise_scale * (1.0 + np.asarray(global_batch, float) / noise_scale)


def calibrate_s_min(observed_steps: float, observed_batch: float, noise_scale: float) -> float:
    """Invert S(B) at one observed run: S_min = S_obs / (1 + B_noise / B_obs)."""
    if observed_steps <= 0 or observed_batch <= 0:
        raise ModelError("calibration needs a positive step count and batch size")
    if not np.isfinite(noise_scale) or noise_scale < 0:
        raise ModelError(f"noise scale must be a non-negative number, got {noise_scale}")
    return observed_steps / (1.0 + noise_scale / observed_batch)
