# SPDX-License-Identifier: MIT
"""Molecular dynamics with preemptible campaigns and an ML surrogate: the package face.

    engines/     the MD job loop (job_loop.run_job) behind one engine protocol (protocol.Engine):
                 OpenMM (openmm_engine) and the torch engine (torch_replicas_engine; its physics
                 in md.torch_physics), their checkpoint formats and outputs
    campaign/    campaigns on Ray: point samplers, the checkpoint schedule, the pool (emulated
                 preemptions, bill, placement), the store, the runner, `md sweep`'s assembly
    nanoconfinement, params, space, sampling_settings, profiles, runs: the model, its parameters,
                 a campaign's box, how a run samples and stops, density profiles, stored runs
    surrogate/   the surrogate (shapes, noise, network, gp, baselines, calibration, domain, metrics)
                 and active learning (active: the pick and the stopping test; active_sweep: the sampler)
    profile_grid: the reduced-position representation the surrogate and the engines' outputs share

Importing this package needs neither OpenMM nor torch nor Ray: OpenMMEngine, TorchEngine and
run_campaign are imported when first used. docs/md-design.md draws the data flow.
"""

from typing import Any

from thrifty.md.engines.job_loop import run_job, run_one
from thrifty.md.engines.protocol import Engine, Progress, ReplicaLayout, Saved
from thrifty.md.nanoconfinement import NanoconfinementModel
from thrifty.md.params import PARAMETERS, ParameterBox
from thrifty.md.runs import Run, read_run, read_runs
from thrifty.md.sampling_settings import SamplingSettings
from thrifty.md.space import ParameterSpace, load_space, parse_space

_LAZY = {"OpenMMEngine": "thrifty.md.engines.openmm_engine", "TorchEngine": "thrifty.md.engines.torch_replicas_engine",
         "run_campaign": "thrifty.md.campaign.runner", "CampaignConfig": "thrifty.md.campaign.runner",
         "NanoconfinementRuns": "thrifty.md.campaign.nanoconfinement_runs"}

__all__ = ["PARAMETERS", "CampaignConfig", "Engine", "NanoconfinementModel", "NanoconfinementRuns", "OpenMMEngine",
           "ParameterBox", "ParameterSpace", "Progress", "ReplicaLayout", "Run", "SamplingSettings", "Saved",
           "TorchEngine", "load_space", "parse_space", "read_run", "read_runs", "run_campaign", "run_job", "run_one"]


def __getattr__(name: str) -> Any:
    """The engines and the campaign runner, imported on first use (PEP 562): they need OpenMM, torch or Ray."""
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'thrifty.md' has no attribute {name!r}")
