# SPDX-License-Identifier: MIT
"""The nanoconfinement surrogate: a network ensemble that predicts both ions' density profiles,
with the physics built in, the MD's noise in its loss and bands calibrated on runs it did not train
on; beside it the baselines that show whether it earns its place.

- shapes: ion counts, symmetry, net charge, the flat baseline (no torch)
- md_noise: training data at the MD's noise and the model of a run's error bar (no torch)
- ensemble: the ensemble network (torch): SurrogateConfig, Ensemble, Prediction, train_ensemble
- gp, baselines: a Gaussian process, the nearest run and the flat profile (no torch)
- calibration: cross-validated band scale and held-out scores (fit_surrogate)
- domain: the joint range check (no torch)
The names below load torch only when used (`thrifty.md.surrogate.shapes` and the other torch-free
modules import without it).
"""

_NETWORK = ("MODEL_FILE", "Ensemble", "Prediction", "SurrogateConfig", "train_ensemble")


def __getattr__(name: str):
    if name in _NETWORK:
        from thrifty.md.surrogate import ensemble
        return getattr(ensemble, name)
    if name == "fit_surrogate":
        from thrifty.md.surrogate.calibration import fit_surrogate
        return fit_surrogate
    raise AttributeError(f"module 'thrifty.md.surrogate' has no attribute {name!r}")
