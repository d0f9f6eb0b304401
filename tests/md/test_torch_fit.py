# SPDX-License-Identifier: MIT
"""Fitting an ion diameter by autograd through a torch-engine run (md.torch_physics.fit): from a target
profile made by the engine at d+ = 0.474 nm (same start and seed), a start 20% above recovers it.

Mutations caught (seen failing): the secant step's sign flipped (step = +gradient / curvature) is
not converged after 10 evaluations; the gradient cut after the first step (it.step without
create_graph in smooth_profile: only the first force stays in the graph) stops unconverged at
0.497 nm; the diameter detached in smooth_profile (torch.where(chosen, diameter_nm.detach(), ...))
leaves no gradient at all (autograd raises). 15 s on one core (27 s under load): 4 replicas of 20
ions, 400 steps of equilibration, 100 differentiated steps per evaluation.
"""

import pytest
import torch

from thrifty.md.nanoconfinement import NanoconfinementModel
from thrifty.md.torch_physics import fit

torch.set_num_threads(1)
D_TRUE_NM = 0.474


def test_a_diameter_20_percent_off_is_recovered_from_the_engine_own_profile():
    model = NanoconfinementModel(h_nm=2.0, c_molar=1.0, box_nm=3.0, cutoff_nm=1.0, d_plus_nm=1.2 * D_TRUE_NM)
    w = fit.window(model)  # equilibrated at the starting guess: nothing of d_true leaks into the start
    target = fit.smooth_profile(w, "cation", torch.tensor(D_TRUE_NM, dtype=torch.float64)).detach()
    result = fit.fit_diameter(w, "cation", target, start_nm=1.2 * D_TRUE_NM)
    assert result.converged and len(result.history) <= 10
    # the loss is 0 at d_true exactly (common random numbers); 1e-4 nm is the stopping step
    assert result.diameter_nm == pytest.approx(D_TRUE_NM, abs=1e-3)
    assert result.history[-1][1] < 1e-3 * result.history[0][1]


def test_an_unknown_ion_is_refused():
    model = NanoconfinementModel(h_nm=2.0, c_molar=1.0, box_nm=3.0, cutoff_nm=1.0)
    w = fit.window(model, n_replicas=1, equilibration_steps=0, steps=1)
    with pytest.raises(ValueError, match="ion must be one of"):
        fit.fit_diameter(w, "water", torch.zeros_like(w.grid_nm), start_nm=0.5)
