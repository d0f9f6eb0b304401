# SPDX-License-Identifier: MIT
"""Named lifetime models fitted on Google's 2019 preemptible-VM data, bundled with the package.

`src/thrifty/data/preemption/models.json` is made by `build_bundle()` from the bundled CSV (source
in SOURCE.md beside it), written by `python -m thrifty.transient.registry`, and checked against a
fresh fit by the tests:
- gcp-2019: bathtub, censored MLE on all 1,442 VMs (the default)
- gcp-2019-lsq: bathtub, least squares on the 717 preempted lifetimes (the HPDC 2020 method)
- gcp-2019-weibull, gcp-2019-exponential: censored MLE on all VMs
- gcp-2019-<machine type>: bathtub MLE per machine type with at least 100 VMs
"""

import json
import logging
from functools import lru_cache
from pathlib import Path

from thrifty.data import data_path
from thrifty.io import read_json, write_json_atomic
from thrifty.transient.fitting import Lifetimes, fit, read_lifetimes
from thrifty.transient.lifetimes import LifetimeModel, LifetimeModelError, model_from_dict

log = logging.getLogger(__name__)

DEFAULT_MODEL = "gcp-2019"
MIN_VMS_PER_TYPE = 100


def data_file() -> Path:
    return data_path("preemption/gcp-preemptible-2019.csv")


def bundle_file() -> Path:
    return data_path("preemption/models.json")


def build_bundle(data: Lifetimes) -> dict[str, dict]:
    bundle = {
        "gcp-2019": fit(data, "bathtub", "mle").to_dict(),
        "gcp-2019-lsq": fit(data, "bathtub", "lsq").to_dict(),
        "gcp-2019-weibull": fit(data, "weibull").to_dict(),
        "gcp-2019-exponential": fit(data, "exponential").to_dict(),
    }
    types, counts = set(data.machine_type.tolist()), {}
    for machine_type in types:
        counts[machine_type] = int((data.machine_type == machine_type).sum())
    for machine_type in sorted(t for t in types if counts[t] >= MIN_VMS_PER_TYPE):
        bundle[f"gcp-2019-{machine_type}"] = fit(data.for_machine_type(machine_type), "bathtub", "mle").to_dict()
    return bundle


def write_bundle(path: Path | None = None) -> Path:
    """Fit every bundled model again and write them (the package's models.json by default)."""
    path = path or bundle_file()
    write_json_atomic(path, build_bundle(read_lifetimes(data_file())))  # a fit's -inf log-likelihood: null
    return path


def main() -> None:
    """`python -m thrifty.transient.registry`: refit the bundled lifetime models; then
    `python -m thrifty.transient.overhead` (its tables are computed from the default model)."""
    print(f"wrote {write_bundle()}")


@lru_cache(maxsize=1)
def _bundled_text() -> str:
    return bundle_file().read_text()


def bundled() -> dict[str, dict]:
    """The bundled fits (the file is read once per process; every call gets a fresh dict)."""
    return json.loads(_bundled_text())


def load_model(name_or_path: str = DEFAULT_MODEL) -> tuple[str, LifetimeModel]:
    """A bundled model by name, or a JSON file written by `thrifty preempt fit --out`."""
    models = bundled()
    if name_or_path in models:
        log.debug("lifetime model %s: bundled", name_or_path)
        return name_or_path, model_from_dict(models[name_or_path])
    path = Path(name_or_path)
    if path.suffix == ".json" and path.exists():
        log.debug("lifetime model %s: read from %s", path.stem, path)
        return path.stem, model_from_dict(read_json(path, LifetimeModelError, "lifetime model"))
    raise LifetimeModelError(f"unknown lifetime model {name_or_path!r}; bundled: {', '.join(models)}")


if __name__ == "__main__":
    main()
