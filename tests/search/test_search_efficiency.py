# SPDX-License-Identifier: MIT
import numpy as np
import pytest

from thrifty.errors import ThriftyError
from thrifty.perf.efficiency import steps_to_target
from thrifty.search.noise_schedule import NoiseSchedule, progress_per_step, read_noise_trace


def test_a_step_advances_by_b_over_one_plus_b_over_the_noise_scale():
    # steps_to_target's S(B) = S_min (1 + B_noise/B) with S_min = E_min / B_noise reaches E_min
    assert progress_per_step(100, 400) == pytest.approx(80.0)
    e_min, b_noise = 1e6, 400.0
    for batch in (16, 400, 4096):
        steps = steps_to_target(batch, e_min / b_noise, b_noise)
        assert steps * progress_per_step(batch, b_noise) == pytest.approx(e_min)


def test_steps_and_advance_are_inverse_for_a_constant_and_a_drifting_noise_scale(tmp_path):
    constant = NoiseSchedule.constant(400, 1e6)
    assert constant.steps(0, 1e6, 100) == pytest.approx(1e6 / 80)
    trace = tmp_path / "noise.csv"
    trace.write_text("progress,noise_scale\n0,100\n1,1000\n")
    drifting = read_noise_trace(trace, 1e6)
    steps = drifting.steps(2e5, 7e5, 256)
    assert drifting.advance(2e5, steps, 256) == pytest.approx(7e5, rel=1e-6)
    # B_noise grows: the second half of the job needs fewer steps than the first
    assert drifting.steps(5e5, 1e6, 256) < drifting.steps(0, 5e5, 256)
    assert drifting.advance(0, 1e9, 256) == pytest.approx(1e6)  # capped at the target


@pytest.mark.parametrize("text", ["progress,noise_scale\n0,100\n0.5,-1\n", "progress,noise_scale\n0.5,1\n0.2,1\n",
                                  "progress,noise_scale\n0,1\n2,1\n", "progress\n0\n",
                                  "progress,noise_scale\n0,100\n0.5,1e300\n"])  # a bound, as --noise-scale's
def test_a_bad_noise_trace_is_one_error(tmp_path, text):
    path = tmp_path / "noise.csv"
    path.write_text(text)
    with pytest.raises(ThriftyError):
        read_noise_trace(path, 1e6)


def test_a_non_positive_constant_noise_scale_is_refused():
    with pytest.raises(ThriftyError):
        NoiseSchedule.constant(0.0, 1e6)
    assert np.isfinite(NoiseSchedule.constant(1.0, 1e6).steps(0, 1, 1))
