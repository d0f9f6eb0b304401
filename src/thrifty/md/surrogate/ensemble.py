# SPDX-License-Identifier: MIT
"""A deep ensemble of small networks that maps a nanoconfinement point to both density profiles,
built so the physics holds by construction (md.surrogate.shapes) and trained at the MD's own noise.

Each member maps the 6 standardised parameters (h, z+, z-, c, d+, d-; md.params; a constant input
such as z- = -1 is only centred) through `hidden` SiLU layers to the weights of a few basis functions
per ion, whose sum is added to the log of the walls' Boltzmann factor (so an untrained member
predicts that ideal-gas profile); a softmax over the half-slit z >= 0 gives the SHAPE, which times
the ion's known integral
(shapes.count_integrals) and mirrored about the mid-plane gives the density. So each ion's
integral is its count, z+ I+ = |z-| I- (zero net charge) and the profile is symmetric, whatever
the weights. (The published surrogate, Kadupitiya, Fox & Jadhao, J. Comput. Sci. 2020, maps the
inputs through 512 -> 256 ReLU layers to the raw bins.)

The basis is set in the distance from the wall, in nm, not in the fraction of the slit: the
layering and depletion of ions next to a wall sit at distances set by their diameters
(0.47-0.63 nm here), whatever the slit's width, so one weight means one thing at every h. Per
ion: Gaussian bumps at `wall_bumps_nm` from the wall plane (width `bump_width_nm`), plus
`slit_modes` cosines over the half-slit for the slow rise or fall towards the mid-plane. On 20
random 30-run splits of the replay set that the held-out benchmark does not score
(benchmarks/bench_md_surrogate_basis.py), this basis held the cation's RMS against the truth to
0.40 of the flat profile's (median; anion 0.30) against 0.60-0.66 (anion 0.41-0.52) for 4-8
cosine modes over the slit fraction.

Loss: soft labels (Kadupitiya, Anousheh & Jadhao, "Designing machine learning surrogates using
outputs of molecular dynamics simulations as soft labels", Mach. Learn.: Sci. Technol. 2021): each
bin's squared error over its MD error bar squared, chi^2 = mean(((rho_hat - rho) / e)^2), so a bin
MD measured well weighs more and no member is asked to fit the noise. Full-batch Adam; member m
holds out fold m of `members` folds of the runs (a seeded permutation) and keeps the weights of its
best epoch on them (early stopping after `patience` epochs without improvement), so every run is
out of sample for one member. The prediction is the members' mean; their standard deviation is
the model's uncertainty (Lakshminarayanan et al., NeurIPS 2017), combined with the MD noise model
(md.surrogate.md_noise) into the band (md.surrogate.calibration). Deterministic for a seed on one machine.

Saved as one file, `surrogate.pt` in the model folder, written atomically.
"""

import io
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

from thrifty.errors import ThriftyError
from thrifty.io import write_bytes_atomic
from thrifty.md.params import PARAMETERS
from thrifty.md.profile_grid import DEFAULT_BINS
from thrifty.md.runs import Run
from thrifty.md.surrogate.domain import Domain
from thrifty.md.surrogate.md_noise import NoiseModel, TrainingData
from thrifty.md.surrogate.shapes import (
    H,
    count_integrals,
    integrals,
    mirror,
    wall_boltzmann,
)

log = logging.getLogger(__name__)

MODEL_FILE = "surrogate.pt"
FORMAT = "thrifty.md.surrogate/3"  # /2: cosine modes over the slit fraction
NORMAL_90 = 1.6449  # the two-sided 90% quantile of a unit normal: the band before calibration
PRIOR_FLOOR = 1e-4  # the prior's least share of a bulk bin, so its log stays finite where no ion goes


@dataclass(frozen=True)
class SurrogateConfig:
    hidden: tuple[int, ...] = (64, 64)
    members: int = 5
    bins: int = DEFAULT_BINS  # even: the half-slit has bins / 2
    wall_bumps_nm: tuple[float, ...] = (0.3, 0.55, 0.8, 1.05)  # centres of the shape's bumps, from the wall plane
    bump_width_nm: float = 0.15  # their standard deviation
    slit_modes: int = 1  # cosines over the half-slit beside them
    max_epochs: int = 2000
    patience: int = 150  # epochs without a better held-out loss before a member stops (best epochs seen: < 110)
    learning_rate: float = 3e-3
    box_nm: float | None = None  # the runs' wall side (None: the model's default for their c)
    seed: int = 0

    def __post_init__(self) -> None:
        if self.bins % 2 or self.bins < 2:
            raise ThriftyError(f"the surrogate's grid needs an even number of bins, got {self.bins}")
        if self.bump_width_nm <= 0 or self.slit_modes < 0 or not self.basis_size:
            raise ThriftyError("the surrogate's basis needs a positive bump width and at least one function")

    @property
    def basis_size(self) -> int:
        """Basis functions per ion: the network's outputs are twice this."""
        return len(self.wall_bumps_nm) + self.slit_modes


@dataclass(frozen=True)
class Prediction:
    members: np.ndarray  # (members, n, 2, bins), molar
    noise_molar: np.ndarray  # (n, 2, bins): the error bar an MD run would have (md.surrogate.md_noise)
    band_scale: float = NORMAL_90  # the band is mean +- band_scale sqrt(std^2 + noise^2)

    @property
    def mean(self) -> np.ndarray:
        return self.members.mean(axis=0)

    @property
    def std(self) -> np.ndarray:
        return self.members.std(axis=0)

    def band(self) -> tuple[np.ndarray, np.ndarray]:
        """The stated 90% band for an MD run's profile at the points: (low, high), molar."""
        half = self.band_scale * np.sqrt(self.std ** 2 + self.noise_molar ** 2)
        return np.clip(self.mean - half, 0, None), self.mean + half


def _network(inputs: int, hidden: tuple[int, ...], outputs: int) -> nn.Sequential:
    layers, width = [], inputs
    for size in hidden:
        layers += [nn.Linear(width, size), nn.SiLU()]
        width = size
    last = nn.Linear(width, outputs)
    nn.init.zeros_(last.weight)  # an untrained member predicts the flat profile (the prior)
    nn.init.zeros_(last.bias)
    return nn.Sequential(*layers, last)


def shape_basis(points: np.ndarray, config: SurrogateConfig) -> np.ndarray:
    """(n, basis_size, bins / 2): the basis functions at the half-slit's bins of each point (module
    docstring): Gaussians in the distance s = h/2 - |z| from the wall plane, then cos(k pi u) with
    u = |z| / (h/2), k = 1..slit_modes (even and smooth at the mid-plane)."""
    half = config.bins // 2
    u = (np.arange(half) + 0.5) / half  # |z| / (h / 2) at the half's bins
    s = points[:, H, None] / 2 * (1 - u)  # (n, half), nm
    bumps = [np.exp(-0.5 * ((s - centre) / config.bump_width_nm) ** 2) for centre in config.wall_bumps_nm]
    cosines = [np.broadcast_to(np.cos(np.pi * k * u), s.shape) for k in range(1, config.slit_modes + 1)]
    return np.stack(bumps + cosines, axis=1)


@dataclass(frozen=True)
class _Frame:
    """What the physics fixes at the points: the density of a bin holding a whole half-integral,
    I / 2 / (h / bins), (n, 2); the walls' log Boltzmann factor on the half-slit, (n, 2, half); and
    the shape's basis there, (n, basis, half)."""
    scale: torch.Tensor
    prior: torch.Tensor
    basis: torch.Tensor

    @classmethod
    def at(cls, points: np.ndarray, config: SurrogateConfig) -> "_Frame":
        points = np.atleast_2d(points)
        cell = points[:, H] / config.bins
        scale = count_integrals(points, config.box_nm) / 2 / cell[:, None]
        ideal = wall_boltzmann(points, config.bins)[..., config.bins // 2:]
        return cls(torch.as_tensor(scale, dtype=torch.float32),
                   torch.as_tensor(np.log(ideal + PRIOR_FLOOR), dtype=torch.float32),
                   torch.as_tensor(shape_basis(points, config), dtype=torch.float32))

    def __getitem__(self, index) -> "_Frame":
        return _Frame(self.scale[index], self.prior[index], self.basis[index])

    def density(self, outputs: torch.Tensor) -> torch.Tensor:
        """(..., n, 2, half) molar from the network's outputs (..., n, 2 basis): per ion the basis'
        weighted sum added to the prior's log-shape, a softmax over the half-slit, times the
        half-integral's density."""
        shape = torch.softmax(self.prior + outputs.unflatten(-1, (2, -1)) @ self.basis, dim=-1)
        return shape * self.scale[..., None]


@dataclass
class Ensemble:
    """Trained members with their normalisation, MD noise model, band scale and training domain."""
    config: SurrogateConfig
    networks: list[nn.Sequential]
    x_mean: np.ndarray
    x_std: np.ndarray
    noise: NoiseModel
    domain: Domain
    epochs: list[int]
    band_scale: float = NORMAL_90
    _x: tuple[torch.Tensor, torch.Tensor] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        for net in self.networks:
            net.eval()
        self._x = (torch.as_tensor(self.x_mean, dtype=torch.float32), torch.as_tensor(self.x_std, dtype=torch.float32))

    def half_members(self, points: np.ndarray) -> np.ndarray:
        """(members, n, 2, bins / 2): each member's half-profiles, molar."""
        points = np.atleast_2d(points)
        x = (torch.as_tensor(points, dtype=torch.float32) - self._x[0]) / self._x[1]
        with torch.inference_mode():
            logits = torch.stack([net(x) for net in self.networks])
            return _Frame.at(points, self.config).density(logits).numpy().astype(float)

    def predict(self, points: np.ndarray) -> Prediction:
        members = mirror(self.half_members(points))
        return Prediction(members, self.noise.error(members.mean(axis=0)), self.band_scale)

    def disagreement(self, points: np.ndarray) -> np.ndarray:
        """(n,): the members' variance over the MD noise variance a run there would have, averaged over
        the bins (both ions, half-slit): how much a run would teach the model, in units of its noise."""
        half = self.half_members(points)
        return (half.var(axis=0) / self.noise.error(half.mean(axis=0)) ** 2).mean(axis=(-1, -2))

    def save(self, folder: Path) -> Path:
        payload = {"format": FORMAT, "config": asdict(self.config), "epochs": self.epochs,
                   "x_mean": self.x_mean.tolist(), "x_std": self.x_std.tolist(), "noise": asdict(self.noise),
                   "domain": self.domain.to_dict(), "band_scale": self.band_scale,
                   "members": [net.state_dict() for net in self.networks]}
        buffer = io.BytesIO()
        torch.save(payload, buffer)
        path = Path(folder) / MODEL_FILE
        write_bytes_atomic(path, buffer.getvalue())
        return path

    @classmethod
    def load(cls, folder: Path) -> "Ensemble":
        path = Path(folder) / MODEL_FILE
        if Path(folder).is_file():  # a new user's pass: a file given was "surrogate.pt not found" in it
            raise ThriftyError(f"{folder} is a file: give the folder `thrifty md train-surrogate --out` wrote")
        if not path.is_file():
            raise ThriftyError(f"no surrogate in {folder}: {MODEL_FILE} not found (train one with "
                               "thrifty md train-surrogate)")
        try:
            payload = torch.load(path, weights_only=True)
            assert isinstance(payload, dict)
        except Exception as exc:  # a truncated file, not a torch file
            raise ThriftyError(f"{path} is not a thrifty surrogate ({type(exc).__name__})") from None
        if payload.get("format") != FORMAT:
            raise ThriftyError(f"{path} is a surrogate of format {payload.get('format')!r}, this thrifty reads "
                               f"{FORMAT!r}: train it again (thrifty md train-surrogate)")
        try:
            config = SurrogateConfig(**{**payload["config"], "hidden": tuple(payload["config"]["hidden"]),
                                        "wall_bumps_nm": tuple(payload["config"]["wall_bumps_nm"])})
            networks = []
            for state in payload["members"]:
                net = _network(len(PARAMETERS), config.hidden, 2 * config.basis_size)
                net.load_state_dict(state)
                networks.append(net)
            return cls(config, networks, np.asarray(payload["x_mean"], float), np.asarray(payload["x_std"], float),
                       NoiseModel(**payload["noise"]), Domain.from_dict(payload["domain"]),
                       list(payload["epochs"]), float(payload["band_scale"]))
        except Exception as exc:  # a damaged payload, a different network
            raise ThriftyError(f"{path} is not a thrifty surrogate ({type(exc).__name__})") from None


def _chi2(predicted: torch.Tensor, target: torch.Tensor, error: torch.Tensor) -> torch.Tensor:
    return (((predicted - target) / error) ** 2).mean()


def _train_member(x: torch.Tensor, frame: _Frame, y: torch.Tensor, e: torch.Tensor, held_out: np.ndarray,
                  config: SurrogateConfig, seed: int) -> tuple[nn.Sequential, int, float]:
    train = torch.as_tensor(np.setdiff1d(np.arange(len(x)), held_out))
    val = torch.as_tensor(held_out)
    torch.manual_seed(seed)
    net = _network(x.shape[1], config.hidden, 2 * config.basis_size)
    optimizer = torch.optim.Adam(net.parameters(), lr=config.learning_rate)
    best, best_state, best_epoch = float("inf"), None, 0
    for epoch in range(config.max_epochs):
        optimizer.zero_grad()
        _chi2(frame[train].density(net(x[train])), y[train], e[train]).backward()
        optimizer.step()
        with torch.no_grad():
            loss = _chi2(frame[val].density(net(x[val])), y[val], e[val]).item()
        if loss < best:
            best, best_epoch = loss, epoch
            best_state = {k: v.clone() for k, v in net.state_dict().items()}
        elif epoch - best_epoch >= config.patience:
            break
    if best_state is None:  # no epoch (max_epochs 0), or no finite validation loss in any
        raise ThriftyError(f"a surrogate network had no finite validation loss in {config.max_epochs} epochs "
                           "(max_epochs, learning_rate or the data)")
    net.load_state_dict(best_state)
    net.eval()
    log.debug("member (seed %d): best validation chi^2/bin %.3g at epoch %d of %d", seed, best, best_epoch + 1,
              epoch + 1)
    return net, best_epoch + 1, best


COUNT_TOLERANCE = 0.05


def check_counts(data: TrainingData, config: SurrogateConfig) -> None:
    """One error if the runs' profiles do not integrate to the ion counts the model gives for the box
    side config.box_nm (within 5% in the median): runs of another model, or of a box whose rounding
    of the counts differs grossly; the surrogate would scale every shape wrongly."""
    measured = integrals(data.points, mirror(data.half))
    expected = count_integrals(data.points, config.box_nm)
    off = float(np.median(np.abs(measured / np.maximum(expected, 1e-12) - 1)))
    if off > COUNT_TOLERANCE:
        box = "the model's default box" if config.box_nm is None else f"a {config.box_nm:g} nm box"
        raise ThriftyError(f"the runs' profiles integrate to ion counts {off:.0%} off those of {box} (median): "
                           "give the box side the runs used (--box-nm)")


def folds(n: int, k: int, seed: int) -> list[np.ndarray]:
    """k folds of range(n) from a seeded permutation."""
    return np.array_split(np.random.default_rng(seed).permutation(n), k)


def train_ensemble(runs: list[Run], config: SurrogateConfig = SurrogateConfig()) -> Ensemble:
    """Train the ensemble on completed runs (at least 5: each member holds a fold out to stop early).
    The band has the uncalibrated normal scale; md.surrogate.calibration.fit_surrogate calibrates it."""
    if len(runs) < max(5, config.members):
        raise ThriftyError(f"a surrogate of {config.members} members needs at least {max(5, config.members)} "
                           f"completed runs, got {len(runs)}")
    data = TrainingData.of(runs, config.bins)
    check_counts(data, config)
    x_mean, x_std = data.points.mean(axis=0), data.points.std(axis=0)
    x_std = np.where(x_std <= 1e-9 * np.maximum(np.abs(x_mean), 1.0), 1.0, x_std)  # rounding leaves ~1e-17
    x = torch.as_tensor((data.points - x_mean) / x_std, dtype=torch.float32)
    y, e = (torch.as_tensor(a, dtype=torch.float32) for a in (data.half, data.half_error))
    frame = _Frame.at(data.points, config)
    members = [_train_member(x, frame, y, e, fold, config, config.seed * 1000 + m)
               for m, fold in enumerate(folds(len(runs), config.members, config.seed))]
    log.info("trained %d members on %d runs: best epochs %s, validation chi^2/bin %s", len(members), len(runs),
             ", ".join(str(epochs) for _, epochs, _ in members), ", ".join(f"{v:.3g}" for _, _, v in members))
    return Ensemble(config, [net for net, _, _ in members], x_mean, x_std, NoiseModel.fit(data.half, data.half_error),
                    Domain.of(data.points), [epochs for _, epochs, _ in members])
