# SPDX-License-Identifier: MIT
"""The nanoconfinement system as a campaign's simulation: a point of the box becomes a run folder
the surrogate reads (params.json beside profiles.csv), stopped by its profiles' convergence."""

import pytest

from thrifty.errors import ThriftyError
from thrifty.md.campaign.checkpoint_schedule import ScheduledCheckpoints
from thrifty.md.campaign.nanoconfinement_runs import NanoconfinementRuns, model_at
from thrifty.md.campaign.simulations import resolve_simulation
from thrifty.md.runs import read_run
from thrifty.md.sampling_settings import SamplingSettings


def test_a_point_names_the_models_parameters_and_valencies_are_integers():
    # mutations caught: unknown names silently ignored; a valency of 2.0 kept as a float
    model = model_at({"h_nm": 3.5, "z_plus": 2.0, "c_molar": 0.4})
    assert model.h_nm == 3.5 and model.z_plus == 2 and isinstance(model.z_plus, int) and model.c_molar == 0.4
    with pytest.raises(ThriftyError, match="no parameter h"):
        model_at({"h": 3.0})
    with pytest.raises(ThriftyError):
        model_at({"z_plus": 0})  # the model's own check
    # mutation caught: a fractional valency rounded (1.5 ran as 2 while the run id hashed 1.5)
    with pytest.raises(ThriftyError, match="z_plus is a valency and must be an integer, got 1.5"):
        model_at({"z_plus": 1.5})


def test_a_campaign_run_writes_a_run_the_surrogate_reads_and_says_why_it_stopped(tmp_path):
    # mutations caught: params.json not written (the surrogate could not train on campaign runs);
    # `converged` not derived from the run's stop (early stopping invisible to the campaign)
    simulate = resolve_simulation("nanoconfinement")
    assert isinstance(simulate, NanoconfinementRuns)
    sampling = SamplingSettings(chunk=20, equilibration_steps=20, samples_per_block=2, tolerance_molar=1e-9,
                                cap_steps=100)
    small = NanoconfinementRuns(platform="Reference", sampling=sampling, box_nm=3.0, cutoff_nm=1.2)
    # a checkpoint after every chunk (mutation caught: the schedule's save() refusing the loop's began_s,
    # which crashed an OpenMM campaign at its first checkpoint)
    checkpoints = ScheduledCheckpoints(tmp_path / "ckpt", [0.0])
    [result] = small.run_batch([{"h_nm": 2.0, "c_molar": 0.5, "z_plus": 1}], [tmp_path / "run"], checkpoints)
    assert result["steps"] == 100 and result["stopped"] == "cap" and result["converged"] is False
    assert checkpoints.saves == 5
    run = read_run(tmp_path / "run")
    assert run.h_nm == 2.0 and run.density.shape[0] == 2 and len(run.z_nm) > 5
    loose = NanoconfinementRuns(platform="Reference", sampling=SamplingSettings(
        chunk=20, equilibration_steps=20, samples_per_block=2, tolerance_molar=1e3, cap_steps=10_000), box_nm=3.0,
        cutoff_nm=1.2)
    [done] = loose.run_batch([{"h_nm": 2.0, "c_molar": 0.5}], [tmp_path / "run2"],
                             ScheduledCheckpoints(tmp_path / "c2", []))
    assert done["converged"] is True and done["steps"] < 10_000
