# SPDX-License-Identifier: MIT
import numpy as np
import pytest

from thrifty.perf.efficiency import calibrate_s_min, examples_to_target, steps_to_target


def test_steps_and_examples_closed_forms():
    s_min, bn = 100.0, 50.0
    assert steps_to_target(50, s_min, bn) == pytest.approx(200.0)  # B = B_noise: twice S_min
    assert examples_to_target(50, s_min, bn) == pytest.approx(2 * s_min * bn)
    big = steps_to_target(1e9, s_min, bn)
    assert big == pytest.approx(s_min, rel=1e-6)
    batches = np.array([8, 64, 512])
    assert np.allclose(examples_to_target(batches, s_min, bn), batches * steps_to_target(batches, s_min, bn))


def test_calibration_inverts_the_model():
    s_min = calibrate_s_min(300, 32, 64)
    assert steps_to_target(32, s_min, 64) == pytest.approx(300)
