"""How good a surrogate's profiles are, as Kadupitiya, Fox & Jadhao (J. Comput. Sci. 2020) measure
it: the fraction of profile bins whose prediction lies within the MD error bar (they report 95-96.5%
on held-out runs), and the RMSE of contact, peak and mid-plane density (molar). No torch.
"""

from dataclasses import dataclass

import numpy as np

from thrifty.md.params import PARAMETERS
from thrifty.md.profile_grid import features

IONS = ("cation", "anion")
D_INDEX = {"cation": PARAMETERS.index("d_plus_nm"), "anion": PARAMETERS.index("d_minus_nm")}


def fraction_within_error(predicted: np.ndarray, simulated: np.ndarray, error: np.ndarray) -> float:
    """Share of bins with |predicted - simulated| <= error (all arrays the same shape)."""
    predicted, simulated, error = (np.asarray(a, float) for a in (predicted, simulated, error))
    return float(np.mean(np.abs(predicted - simulated) <= error))


def rmse(predicted: np.ndarray, simulated: np.ndarray) -> float:
    return float(np.sqrt(np.mean((np.asarray(predicted, float) - np.asarray(simulated, float)) ** 2)))


@dataclass(frozen=True)
class Accuracy:
    within_error: float  # fraction of bins (both ions) within the MD error bar
    rmse_molar: dict[str, float]  # e.g. "cation_contact": RMSE over the runs

    def to_dict(self) -> dict:
        return {"within_error": self.within_error, "rmse_molar": self.rmse_molar}


def accuracy(points: np.ndarray, predicted: np.ndarray, simulated: np.ndarray, error: np.ndarray) -> Accuracy:
    """Accuracy over runs: points (n, 6); predicted, simulated and error (n, 2, bins) on the grid."""
    h = points[:, PARAMETERS.index("h_nm")]
    scores = {}
    for i, ion in enumerate(IONS):
        d = points[:, D_INDEX[ion]]
        mine = [features(p, hh, dd) for p, hh, dd in zip(predicted[:, i], h, d)]
        theirs = [features(p, hh, dd) for p, hh, dd in zip(simulated[:, i], h, d)]
        for name in ("contact", "peak", "mid"):
            scores[f"{ion}_{name}"] = rmse([m[name] for m in mine], [t[name] for t in theirs])
    return Accuracy(fraction_within_error(predicted, simulated, error), scores)
