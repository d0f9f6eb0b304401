"""A deep ensemble of MLPs that maps a nanoconfinement point to both density profiles.

Each member is the published surrogate's network (Kadupitiya, Fox & Jadhao, J. Comput. Sci. 2020:
inputs -> 512 -> 256 -> profile, ReLU), here 6 inputs (h, z+, z-, c, d+, d-; md.params) and
2 x bins outputs (cation then anion density on the reduced grid, md.profile_grid). Inputs are
standardised (a constant input, such as z- = -1, is only centred, also when rounding
makes its standard deviation 1e-17 rather than 0); each output bin is standardised
with its training mean and standard deviation (floored at 1% of the largest, so bins that are
always empty near the walls do not blow up). Members differ in their seed: their initial weights,
their own random validation split (`validation_fraction`) and their minibatch order; each trains
with Adam on mean squared error and keeps the weights of its best validation epoch, stopping after
`patience` epochs without improvement (early stopping). The prediction is the members' mean,
negative densities clipped to 0; the members' standard deviation is its uncertainty
(Lakshminarayanan et al., "Simple and scalable predictive uncertainty estimation using deep
ensembles", NeurIPS 2017). Deterministic for a seed on one machine.

Saved as one file, `surrogate.pt` in the model folder, written atomically: torch state dicts,
normalisation, grid size, configuration and the range of the training points.
"""

import io
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from thrifty.errors import ThriftyError
from thrifty.io import write_bytes_atomic
from thrifty.md.params import PARAMETERS
from thrifty.md.profile_grid import DEFAULT_BINS
from thrifty.md.runs import Run, grid_arrays

MODEL_FILE = "surrogate.pt"
FORMAT = "thrifty.md.surrogate/1"


@dataclass(frozen=True)
class SurrogateConfig:
    hidden: tuple[int, ...] = (512, 256)  # the published network's hidden layers
    members: int = 5
    bins: int = DEFAULT_BINS
    max_epochs: int = 2000
    patience: int = 200  # epochs without a better validation loss before a member stops
    batch_size: int = 64
    learning_rate: float = 1e-3
    validation_fraction: float = 0.2
    seed: int = 0


@dataclass(frozen=True)
class Prediction:
    members: np.ndarray  # (members, n, 2, bins), molar, clipped at 0

    @property
    def mean(self) -> np.ndarray:
        return self.members.mean(axis=0)

    @property
    def std(self) -> np.ndarray:
        return self.members.std(axis=0)


def _network(inputs: int, hidden: tuple[int, ...], outputs: int) -> nn.Sequential:
    layers, width = [], inputs
    for size in hidden:
        layers += [nn.Linear(width, size), nn.ReLU()]
        width = size
    return nn.Sequential(*layers, nn.Linear(width, outputs))


class Ensemble:
    """Trained members with their normalisation; `predict` and `spread` take points (n, 6)."""

    def __init__(self, config: SurrogateConfig, networks: list[nn.Sequential], norm: dict[str, np.ndarray],
                 epochs: list[int]) -> None:
        self.config, self.networks, self.norm, self.epochs = config, networks, norm, epochs
        for net in networks:
            net.eval()
        self._x = [torch.as_tensor(norm[k], dtype=torch.float32) for k in ("x_mean", "x_std")]
        self._y = [torch.as_tensor(norm[k], dtype=torch.float32) for k in ("y_mean", "y_std")]

    def _scaled(self, points: np.ndarray) -> torch.Tensor:
        x = (torch.as_tensor(np.atleast_2d(points), dtype=torch.float32) - self._x[0]) / self._x[1]
        with torch.inference_mode():
            return torch.stack([net(x) for net in self.networks])

    def predict(self, points: np.ndarray) -> Prediction:
        y = (self._scaled(points) * self._y[1] + self._y[0]).clamp_min(0.0).numpy().astype(float)
        return Prediction(y.reshape(y.shape[0], y.shape[1], 2, self.config.bins))

    def spread(self, points: np.ndarray) -> np.ndarray:
        """Mean over both profiles' bins of the members' standard deviation, in units of each
        bin's training spread: the active-learning uncertainty of each point (n,)."""
        return self._scaled(points).std(dim=0, unbiased=False).mean(dim=-1).numpy().astype(float)

    def training_range(self) -> tuple[np.ndarray, np.ndarray]:
        return self.norm["x_low"], self.norm["x_high"]

    def save(self, folder: Path) -> Path:
        payload = {"format": FORMAT, "config": asdict(self.config), "epochs": self.epochs,
                   "norm": {k: v.tolist() for k, v in self.norm.items()},
                   "members": [net.state_dict() for net in self.networks]}
        buffer = io.BytesIO()
        torch.save(payload, buffer)
        path = Path(folder) / MODEL_FILE
        write_bytes_atomic(path, buffer.getvalue())
        return path

    @classmethod
    def load(cls, folder: Path) -> "Ensemble":
        path = Path(folder) / MODEL_FILE
        if not path.is_file():
            raise ThriftyError(f"no surrogate in {folder}: {MODEL_FILE} not found (train one with "
                               "thrifty md train-surrogate)")
        try:
            payload = torch.load(path, weights_only=True)
            assert isinstance(payload, dict) and payload.get("format") == FORMAT
            config = SurrogateConfig(**{**payload["config"], "hidden": tuple(payload["config"]["hidden"])})
            networks = []
            for state in payload["members"]:
                net = _network(len(PARAMETERS), config.hidden, 2 * config.bins)
                net.load_state_dict(state)
                networks.append(net)
            norm = {k: np.asarray(v, float) for k, v in payload["norm"].items()}
        except Exception as exc:  # a truncated file, another format, a different network
            raise ThriftyError(f"{path} is not a thrifty surrogate ({type(exc).__name__})") from None
        return cls(config, networks, norm, list(payload["epochs"]))


def _normalisation(points: np.ndarray, targets: np.ndarray) -> dict[str, np.ndarray]:
    x_mean, x_std, y_std = points.mean(axis=0), points.std(axis=0), targets.std(axis=0)
    constant = x_std <= 1e-9 * np.maximum(np.abs(x_mean), 1.0)  # rounding leaves ~1e-17, not 0
    return {"x_mean": x_mean, "x_std": np.where(constant, 1.0, x_std),
            "y_mean": targets.mean(axis=0), "y_std": np.maximum(y_std, 0.01 * y_std.max() + 1e-12),
            "x_low": points.min(axis=0), "x_high": points.max(axis=0)}


def _train_member(x: torch.Tensor, y: torch.Tensor, config: SurrogateConfig, seed: int) -> tuple[nn.Sequential, int]:
    generator = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(x), generator=generator)
    n_val = max(1, round(config.validation_fraction * len(x)))
    val, train = order[:n_val], order[n_val:]
    torch.manual_seed(seed)
    net = _network(x.shape[1], config.hidden, y.shape[1])
    optimizer = torch.optim.Adam(net.parameters(), lr=config.learning_rate)
    best, best_state, best_epoch = float("inf"), None, 0
    for epoch in range(config.max_epochs):
        net.train()
        for batch in train[torch.randperm(len(train), generator=generator)].split(config.batch_size):
            optimizer.zero_grad()
            nn.functional.mse_loss(net(x[batch]), y[batch]).backward()
            optimizer.step()
        net.eval()
        with torch.no_grad():
            loss = nn.functional.mse_loss(net(x[val]), y[val]).item()
        if loss < best:
            best, best_epoch = loss, epoch
            best_state = {k: v.clone() for k, v in net.state_dict().items()}
        elif epoch - best_epoch >= config.patience:
            break
    net.load_state_dict(best_state)
    return net, best_epoch + 1


def train_ensemble(runs: list[Run], config: SurrogateConfig = SurrogateConfig()) -> Ensemble:
    """Train the ensemble on completed runs (at least 5: each member holds some out to stop early)."""
    if len(runs) < 5:
        raise ThriftyError(f"a surrogate needs at least 5 completed runs, got {len(runs)}")
    points, density, _ = grid_arrays(runs, config.bins)
    targets = density.reshape(len(runs), -1)
    norm = _normalisation(points, targets)
    x = torch.as_tensor((points - norm["x_mean"]) / norm["x_std"], dtype=torch.float32)
    y = torch.as_tensor((targets - norm["y_mean"]) / norm["y_std"], dtype=torch.float32)
    trained = [_train_member(x, y, config, config.seed * 1000 + m) for m in range(config.members)]
    return Ensemble(config, [net for net, _ in trained], norm, [epochs for _, epochs in trained])
