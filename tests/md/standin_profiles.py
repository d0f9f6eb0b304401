"""TEST AND BENCHMARK FIXTURE, NOT PHYSICS: cheap analytic stand-in profiles for the nanoconfinement
surrogate, so the ensemble and active learning can be developed before the MD campaign runs.

The shape only looks like what confined electrolytes show (Kadupitiya, Fox & Jadhao 2020, Fig. 3):
no ion centre within d/2 of a wall (the depletion layer), a contact peak at d/2 whose height grows
with the valency and the concentration, a dip behind it, decaying over a Debye-like length
0.304 / sqrt(I) nm (I the ionic strength, molar) to the bulk value in the middle: c for the
cation, z+ c for the anion (electroneutrality). Each bin gets Gaussian noise of sd
0.03 rho + 0.01 c_ion and an error bar of 2 sd (a 95% bar), like an MD average with its error.
"""

import json
from pathlib import Path

import numpy as np

from thrifty.md.active import DEFAULT_MIN_DISTANCE, next_points
from thrifty.md.params import PARAMETERS, ParameterBox
from thrifty.md.runs import Run, grid_arrays
from thrifty.md.surrogate import SurrogateConfig, train_ensemble
from thrifty.md.surrogate_metrics import accuracy

BIN_NM = 0.05


def true_profiles(point: np.ndarray, z_nm: np.ndarray) -> np.ndarray:
    """Noise-free (2, len(z)) cation and anion densities (molar), z from the mid-plane."""
    h, zp, _, c, d_plus, d_minus = (float(v) for v in point)
    ionic_strength = 0.5 * (c * zp ** 2 + zp * c)
    debye_nm = 0.304 / np.sqrt(ionic_strength)
    out = []
    for valency, bulk, d, gain in ((zp, c, d_plus, 0.6 * zp ** 1.5), (1, zp * c, d_minus, 0.3)):
        height = gain * np.sqrt(c / 0.3) * (0.5 / d) ** 0.5
        rho = np.ones_like(z_nm)
        for x in (h / 2 + z_nm, h / 2 - z_nm):  # distance from each wall
            gap = x - d / 2
            rho += np.where(gap >= 0, height * np.exp(-gap / debye_nm)
                            - 0.3 * height / (1 + height) * np.exp(-((gap - 1.5 * d) / (0.5 * d)) ** 2), 0.0)
        inside = np.minimum(h / 2 + z_nm, h / 2 - z_nm) >= d / 2
        out.append(np.where(inside, bulk * rho, 0.0))
    return np.array(out)


def standin_run(point: np.ndarray, rng: np.random.Generator, name: str = "") -> Run:
    h = float(point[0])
    n = int(round(h / BIN_NM))
    z_nm = -h / 2 + (np.arange(n) + 0.5) * h / n
    rho = true_profiles(point, z_nm)
    bulk = np.array([[point[3]], [point[1] * point[3]]])
    sd = 0.03 * rho + 0.01 * bulk
    noisy = np.where(rho > 0, np.maximum(rho + sd * rng.standard_normal(rho.shape), 0.0), 0.0)
    return Run(np.asarray(point, float), z_nm, noisy, 2 * sd, name)


def standin_runs(points: np.ndarray, seed: int) -> list[Run]:
    rng = np.random.default_rng(seed)
    return [standin_run(p, rng, f"run{i:04d}") for i, p in enumerate(points)]


def write_run(folder: Path, run: Run) -> Path:
    """The run as the MD campaign writes it: profiles.csv and params.json."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "params.json").write_text(json.dumps(dict(zip(PARAMETERS, run.point.tolist()))))
    rows = ["z_nm,cation_molar,cation_err,anion_molar,anion_err"]
    rows += [f"{z:.4f},{a:.6f},{ea:.6f},{b:.6f},{eb:.6f}"
             for z, a, ea, b, eb in zip(run.z_nm, run.density[0], run.error[0], run.density[1], run.error[1])]
    (folder / "profiles.csv").write_text("\n".join(rows) + "\n")
    return folder


def grid_points(levels: tuple[int, int, int, int], box: ParameterBox) -> np.ndarray:
    """A full grid: z+ over its integers, h, c, d+, d- at `levels` evenly spaced values each
    (one level: the range's middle)."""
    axes = []
    for name, n in zip(("h_nm", "c_molar", "d_plus_nm", "d_minus_nm"), levels):
        i = PARAMETERS.index(name)
        axes.append(np.linspace(box.low[i], box.high[i], n) if n > 1 else [0.5 * (box.low[i] + box.high[i])])
    zp = PARAMETERS.index("z_plus")
    grid = np.array(np.meshgrid(axes[0], np.arange(box.low[zp], box.high[zp] + 1), [box.low[2]], *axes[1:],
                                indexing="ij")).reshape(len(PARAMETERS), -1).T
    return grid


GRID_LEVELS = ((1, 1, 1, 1), (2, 1, 1, 1), (2, 2, 1, 1), (2, 2, 2, 1), (2, 2, 2, 2), (3, 2, 2, 2),
               (3, 3, 2, 2), (3, 3, 3, 2), (3, 3, 3, 3))


def learning_curve(strategy: str, config: SurrogateConfig, *, start: int, k: int, budget: int,
                   test: list[Run], seed: int, min_distance: float = DEFAULT_MIN_DISTANCE) -> list[dict]:
    """Held-out accuracy as the training set grows: `active` and `random` start from the same
    `start` random runs and add k per round up to `budget`; `grid` trains on each grid of
    GRID_LEVELS with at most `budget` points."""
    box, rng = ParameterBox(), np.random.default_rng(seed)
    points, density, error = grid_arrays(test, config.bins)
    curve = []

    def score(runs: list[Run]) -> object:
        model = train_ensemble(runs, config)
        result = accuracy(points, model.predict(points).mean, density, error)
        curve.append({"runs": len(runs), "within_error": result.within_error, **result.rmse_molar})
        return model

    if strategy == "grid":
        for levels in GRID_LEVELS:
            grid = grid_points(levels, box)
            if len(grid) >= 5 and len(grid) <= budget:
                score(standin_runs(grid, seed + 1))
        return curve
    runs = standin_runs(box.sample(start, rng), seed + 1)
    run_rng = np.random.default_rng(seed + 2)
    while True:
        model = score(runs)
        if len(runs) + k > budget:
            return curve
        new = next_points(model, box, k, rng, min_distance=min_distance) if strategy == "active" \
            else box.sample(k, rng)
        runs += [standin_run(p, run_rng, f"run{len(runs) + i:04d}") for i, p in enumerate(new)]


def runs_to_target(curve: list[dict], target: float) -> int | None:
    """The fewest runs at which the held-out share within the error bar reached `target`."""
    return next((row["runs"] for row in curve if row["within_error"] >= target), None)
