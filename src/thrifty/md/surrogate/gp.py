# SPDX-License-Identifier: MIT
"""A Gaussian process regression with numpy and scipy (Rasmussen & Williams, "Gaussian Processes for
Machine Learning", MIT Press 2006; equations cited by number).

Kernel: Matern 5/2 with one length scale per input (automatic relevance determination, R&W eq.
4.17): k(r) = s^2 (1 + sqrt(5) r + 5 r^2 / 3) exp(-sqrt(5) r), r^2 = sum_j (x_j - x'_j)^2 / l_j^2,
plus noise variance n^2 on the diagonal. Several outputs share the kernel (each output standardised
to mean 0, sd 1 first): the log marginal likelihood is the sum of the outputs' (R&W eq. 2.30),
maximised over log(l, s, n) with scipy.optimize (L-BFGS-B, gradient by finite differences; R&W
section 5.4.1) from a few starting points. Prediction: R&W algorithm 2.1 (Cholesky).
"""

import numpy as np
from scipy.linalg import cho_factor, cho_solve
from scipy.optimize import minimize

LOG_BOUNDS = (-4.0, 3.0)  # length scales and signal sd between e^-4 and e^3 (inputs are scaled to ~[0, 1])
LOG_NOISE_BOUNDS = (-7.0, 1.0)


def matern52(a: np.ndarray, b: np.ndarray, lengths: np.ndarray, signal_var: float) -> np.ndarray:
    r = np.sqrt(np.maximum((((a[:, None, :] - b[None, :, :]) / lengths) ** 2).sum(-1), 0.0))
    return signal_var * (1 + np.sqrt(5) * r + 5 * r ** 2 / 3) * np.exp(-np.sqrt(5) * r)


class GaussianProcess:
    """Fit on inputs x (n, d) and outputs y (n, m); predict mean and variance (m outputs)."""

    def __init__(self, x: np.ndarray, y: np.ndarray, restarts: int = 3) -> None:
        self.x = np.asarray(x, float)
        y = np.asarray(y, float)
        self.y_mean, self.y_sd = y.mean(axis=0), np.maximum(y.std(axis=0), 1e-9)
        self.y = (y - self.y_mean) / self.y_sd
        dims = self.x.shape[1]
        starts = [np.r_[np.full(dims, np.log(v)), 0.0, np.log(0.1)] for v in (0.3, 1.0, 3.0)][:max(restarts, 1)]
        bounds = [LOG_BOUNDS] * (dims + 1) + [LOG_NOISE_BOUNDS]
        best = min((minimize(self._negative_log_likelihood, s, method="L-BFGS-B", bounds=bounds) for s in starts),
                   key=lambda r: r.fun)
        self.log_params = best.x
        self.lengths, self.signal_var, self.noise_var = self._unpack(best.x)
        self._factor = cho_factor(self._gram(), lower=True)
        self._alpha = cho_solve(self._factor, self.y)

    def _unpack(self, theta: np.ndarray) -> tuple[np.ndarray, float, float]:
        return np.exp(theta[:-2]), float(np.exp(2 * theta[-2])), float(np.exp(2 * theta[-1]))

    def _gram(self, theta: np.ndarray | None = None) -> np.ndarray:
        lengths, signal_var, noise_var = self._unpack(self.log_params if theta is None else theta)
        return matern52(self.x, self.x, lengths, signal_var) + (noise_var + 1e-8) * np.eye(len(self.x))

    def _negative_log_likelihood(self, theta: np.ndarray) -> float:
        """-log p(y | X, theta) summed over outputs (R&W eq. 2.30)."""
        try:
            factor = cho_factor(self._gram(theta), lower=True)
        except np.linalg.LinAlgError:
            return 1e12
        alpha = cho_solve(factor, self.y)
        n, m = self.y.shape
        return float(0.5 * np.sum(self.y * alpha) + m * np.log(np.diag(factor[0])).sum() + 0.5 * n * m * np.log(2 * np.pi))

    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean (n, m) and variance (n, m) of the latent function (without the noise), R&W alg. 2.1."""
        k_star = matern52(np.atleast_2d(x), self.x, self.lengths, self.signal_var)
        mean = k_star @ self._alpha
        v = cho_solve(self._factor, k_star.T)
        var = np.maximum(self.signal_var - np.sum(k_star * v.T, axis=1), 0.0)
        return mean * self.y_sd + self.y_mean, var[:, None] * self.y_sd ** 2
