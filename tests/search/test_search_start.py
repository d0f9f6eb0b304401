# SPDX-License-Identifier: MIT
"""`thrifty search --backend local` without --start / --target-samples / --noise-scale: the start
the plan's models recommend (search.start) and the defaults from the workload's job model.

The job model is a fake with a known step-time model (thrifty.pipeline.job_model patched: no
profile runs) and the search itself is stubbed (no training runs): these tests are about what the
search is given, not how it searches."""

import json

import numpy as np
import pytest

from thrifty.cli.search import Ran
from thrifty.perf.jobmodel import JobModel
from thrifty.perf.steptime import StepTimeModel
from thrifty.search.config import Config
from thrifty.search.local import LocalBackend, LocalType
from thrifty.search.loop import Outcome
from thrifty.search.noise_schedule import NoiseSchedule
from thrifty.search.start import predict_local

# a_c, b_c (s/sample), p, a_intra, b_intra, a_inter, b_inter, contention, overlap g = 1 (no overlap)
PARAMS = np.array([1e-3, 1e-4, 1.0, 2e-3, 1e-3, 2e-3, 1e-3, 0.0, 1.0])
S_MIN, B_NOISE = 200.0, 100.0  # E_min = 20,000 samples
# The cheapest $/h type crawls: at 1/200 of this machine its cost to the target is well above the
# fast type's, so the plan's start is `fast` while cheapest_start would pick `crawl`.
TYPES_CSV = "instance_type,speed,workers_per_node,price_per_hour\ncrawl,0.005,1,0.01\nfast,1.0,1,0.05\n"


def fake_job(recipe: dict | None = None) -> JobModel:
    return JobModel(step_time=StepTimeModel(PARAMS), noise_scale=float("nan") if recipe else B_NOISE,
                    noise_scale_interval=(80.0, 120.0), s_min=float("nan") if recipe else S_MIN,
                    memory_base_bytes=0.0, memory_per_sample_bytes=1.0, gradient_bytes=4e4, train_size=1437,
                    profiled_instance_type="local", threads_per_rank=1, calibration_batch=64,
                    calibration_steps=512.5, recipe=recipe)


@pytest.fixture()
def local_cli(run_cli, tmp_path, monkeypatch):
    """Run `thrifty search --backend local` with the fake job model and a stubbed search; returns
    (code, stdout, stderr, the LocalBackend the search was given or None)."""
    given = {}

    def job_model(store, workload, **kwargs):
        return given.get("job", fake_job()), True

    def stub_search(local, workload, goal, first, seed, store, resume, json_out, stack):
        given["local"] = local
        return Ran(Outcome(10.0, 0.001, first), stored=False)
    monkeypatch.setattr("thrifty.pipeline.job_model", job_model)
    monkeypatch.setattr("thrifty.cli.search._local_search", stub_search)
    types = tmp_path / "types.csv"
    types.write_text(TYPES_CSV)

    def run(*more, job: JobModel | None = None):
        if job is not None:
            given["job"] = job
        code, out, err = run_cli("search", "--backend", "local", "--workload", "builtin:digits", "--types", types,
                                 "--batches", "32,64,128", "--startup-cost", "0s", "--work-dir", tmp_path / "work",
                                 "--db", tmp_path / "thrifty.db", *more)
        return code, out, err, given.get("local")
    return run


def test_target_and_noise_scale_come_from_the_workloads_job_model(local_cli):
    """Catches: still requiring --target-samples / --noise-scale, or E_min other than S_min x B_noise
    (e.g. S_min alone), or a schedule not built from them."""
    code, out, err, local = local_cli("--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["target_samples"] == pytest.approx(S_MIN * B_NOISE) and result["noise_scale"] == B_NOISE
    assert result["target_samples_source"] == result["noise_scale_source"] == "workload profile"
    assert local.schedule.progress[-1] == pytest.approx(S_MIN * B_NOISE) and local.schedule.at(0) == B_NOISE


def test_options_override_the_job_models_defaults(local_cli):
    """Catches: the job model's numbers winning over the options given."""
    code, out, err, local = local_cli("--target-samples", 5000, "--json")
    result = json.loads(out)
    assert code == 0, err
    assert result["target_samples"] == 5000 and result["target_samples_source"] == "options"
    assert result["noise_scale"] == B_NOISE and result["noise_scale_source"] == "workload profile"
    assert local.schedule.progress[-1] == 5000


def test_the_start_is_the_plans_predicted_best_not_the_cheapest_per_hour(local_cli):
    """Catches: falling back to cheapest_start (crawl, the cheapest $/h), or ranking by $/h."""
    code, out, err, local = local_cli("--json")
    result = json.loads(out)
    assert code == 0, err
    configs, time_s, cost_usd = predict_local(fake_job(), local)
    cheapest_cost = configs[int(np.lexsort((time_s, cost_usd))[0])]
    assert result["start_source"] == "plan" and result["start_config"] == cheapest_cost.to_dict()
    assert result["start_config"]["instance_type"] == "fast"
    assert result["start_predicted"]["cost_usd"] == pytest.approx(cost_usd.min())
    code, out, _, _ = local_cli()
    assert code == 0 and f"start  {cheapest_cost.label()} (thrifty plan's recommendation: predicted" in out
    assert "(from the workload profile)" in out


def test_objective_time_starts_on_the_fastest_prediction(local_cli):
    """Catches: the start ignoring --objective (always the cheapest)."""
    code, out, err, local = local_cli("--objective", "time", "--json")
    assert code == 0, err
    configs, time_s, _ = predict_local(fake_job(), local)
    assert json.loads(out)["start_config"] == configs[int(np.argmin(time_s))].to_dict()


def test_a_deadline_no_candidate_meets_is_one_line_naming_the_fastest(local_cli):
    """Catches: plan_start ignoring the deadline (the search would start anyway)."""
    code, _, err, _ = local_cli("--deadline", "2s")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "no emulated configuration is predicted to meet the deadline of 2 s" in err
    assert "the fastest, fast 2x1 B=64, is predicted to take 3 s" in err


def test_start_overrides_the_plan_and_needs_no_job_model_with_target_and_noise(local_cli, monkeypatch):
    """Catches: --start ignored in favour of the plan, or a profile taken when nothing needs it."""
    def no_profile(*args, **kwargs):
        raise AssertionError("the job model was asked for")
    monkeypatch.setattr("thrifty.pipeline.job_model", no_profile)
    code, out, err, _ = local_cli("--start", "crawl:1:1:64", "--target-samples", 1e4, "--noise-scale", 50, "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["start_config"] == Config("crawl", 1, 1, 64).to_dict() and result["start_source"] == "--start"
    assert result["target_samples_source"] == result["noise_scale_source"] == "options"


def test_a_recipe_job_model_asks_for_the_target_and_noise_scale(local_cli):
    """Catches: a NaN target from a recipe's job model reaching the search."""
    recipe = {"epochs": 10, "batch": 64, "min_batch": 32, "max_batch": 256, "source": "a paper"}
    code, _, err, _ = local_cli("--noise-scale", 50, job=fake_job(recipe))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "published recipe (a paper)" in err and "give --target-samples" in err and "--noise-scale" not in err


def test_predicted_step_slows_compute_not_sync(tmp_path):
    """T = (T_c / speed)^g + T_n)^(1/g) on this machine; catches: slowing the whole step (sync too),
    or not slowing at all, or the billing minimum left out."""
    types = [LocalType("half", 0.5, 1, 3.6)]
    backend = LocalBackend("builtin:digits", types, NoiseSchedule.constant(B_NOISE, S_MIN * B_NOISE), tmp_path,
                           global_batches=[64], max_nodes=2, max_ranks=2)
    configs, time_s, cost_usd = predict_local(fake_job(), backend)
    assert configs == [Config("half", 1, 1, 64), Config("half", 2, 2, 64)]
    steps = S_MIN * (1 + B_NOISE / 64)
    one = (1e-3 + 1e-4 * 64) / 0.5  # one rank: compute only
    two = (1e-3 + 1e-4 * 32) / 0.5 + 2e-3  # two ranks on this machine: slowed compute + intra-node sync
    assert time_s == pytest.approx([steps * one, steps * two])
    assert cost_usd == pytest.approx([max(t, 60.0) * n * 3.6 / 3600 for t, n in zip(time_s, (1, 2), strict=False)])
