# SPDX-License-Identifier: MIT
"""Profiles of a batch of replicas from the torch engine: one per replica, in md.profiles' bins and
units, holding every ion in the slit."""

import pytest
import torch
from test_nanoconfinement import SMALL
from torch_reference_sampling import sample_profiles

from thrifty.md.nanoconfinement import NanoconfinementModel, ion_counts
from thrifty.md.profiles import PER_NM3_PER_MOLAR

torch.set_num_threads(1)


def test_each_replica_gets_its_own_profiles_and_they_count_its_ions():
    models = [NanoconfinementModel(**SMALL), NanoconfinementModel(**SMALL | dict(h_nm=2.5), z_plus=2)]
    profiles = sample_profiles(models, steps=200, equilibration_steps=50, chunk=10, samples_per_block=5)
    assert len(profiles) == 2
    for model, p in zip(models, profiles, strict=True):
        assert len(p.z_nm) == round(model.h_nm / 0.05) and p.complete_blocks == 3
        ions = p.molar.sum(-1) * p.bin_width_nm * model.side_nm ** 2 * PER_NM3_PER_MOLAR
        assert ions.tolist() == pytest.approx(list(ion_counts(model)), rel=1e-9)  # (cations, anions)
