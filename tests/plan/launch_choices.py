# SPDX-License-Identifier: MIT
"""Plan choices (PlanResult.describe's keys) and stand-in programs for the launch tests."""

import stat
from pathlib import Path


def plan_choice(**changes) -> dict:
    """2 GCP n1-standard-16 spot nodes with 4 T4 each, planned at amp, changed by `changes`."""
    base = {"cloud": "gcp", "region": "us-central1", "instance_type": "n1-standard-16",
            "accelerator": "T4", "accelerator_count": 4, "nodes": 2, "workers": 8,
            "global_batch": 256, "local_batch": 32, "spot": True, "price_per_hour": 2.0,
            "threads_per_rank": 3, "epochs": 12.345, "until_target": True, "precision": "amp"}
    return {**base, **changes}


CPU_ONE_NODE = {"accelerator": None, "accelerator_count": 0, "instance_type": "n2-standard-4",
                "nodes": 1, "workers": 2, "threads_per_rank": 2, "epochs": 90.0, "until_target": False,
                "precision": "fp32"}


def fake_bin(tmp_path: Path, *, quiet: bool = False) -> Path:
    """`torchrun` and `conda` stand-ins that print what they were called with (nothing when
    quiet: the real torchrun then runs, and a quiet conda leaves its JSON output alone)."""
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in ("conda",) if quiet else ("torchrun", "conda"):
        script = bin_dir / name
        script.write_text("#!/bin/sh\n" if quiet else f'#!/bin/sh\necho "{name} OMP_NUM_THREADS=$OMP_NUM_THREADS $*"\n')
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return bin_dir
