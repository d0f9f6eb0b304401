# SPDX-License-Identifier: MIT
"""The search measures the gradient noise scale as it trains and follows it: the sim's per-step
estimates, windows that wait for the pooled noise precision, re-checks after settling that follow
a drifting B_noise and leave a constant one alone, and a resume that carries all of it. Each test
names the mutation it catches."""

from dataclasses import replace

import numpy as np
import pytest
from search_support import NOISE_SCALE, TARGET, scenario

from thrifty.search.config import Config
from thrifty.search.harness import Scenario, default_start, oracle
from thrifty.search.loop import Search
from thrifty.search.noise_schedule import NoiseSchedule
from thrifty.search.rule import Objective
from thrifty.search.session import run_search
from thrifty.search.sim import GRAD_SQ_SPREAD, TRACE_SPREAD, SimBackend
from thrifty.store import Store


def drifting(rows, kind="time", growth=16.0) -> Scenario:
    """B_noise growing `growth`-fold, linearly in progress, around the tests' constant one."""
    low = NOISE_SCALE / np.sqrt(growth)
    return Scenario(rows, NoiseSchedule.from_points([0, 1], [low, low * growth], TARGET), Objective(kind))


def test_the_sim_draws_per_step_estimates_around_the_schedule_with_the_measured_spread(rows):
    # mutations caught: estimates whose ratio is not the schedule's B_noise; a spread that is not
    # the measured one; one rank measuring every step (the trainer splits every 8th only)
    schedule = NoiseSchedule.from_points([0, 1], [100.0, 1000.0], TARGET)
    backend = SimBackend(rows, schedule, seed=0)
    backend.launch(Config("big", 8, 8, 512))
    window = backend.measure(4000)
    g, t = window.noise.grad_sq, window.noise.trace
    assert len(g) == len(t) == 4000
    assert t.mean() / g.mean() == pytest.approx(100.0, rel=0.15)
    assert np.std(g) == pytest.approx(GRAD_SQ_SPREAD, rel=0.1)
    assert np.std(t) / np.mean(t) == pytest.approx(TRACE_SPREAD, rel=0.15) and t.min() > 0
    backend.train_until(0.9 * TARGET)
    late = backend.measure(4000).noise
    assert late.trace.mean() / late.grad_sq.mean() == pytest.approx(schedule.at(backend.progress), rel=0.2)
    single = SimBackend(rows, schedule, seed=0)
    single.launch(Config("big", 1, 1, 512))
    assert len(single.measure(80).noise.grad_sq) == 10


def test_a_probe_window_waits_for_the_pooled_noise_precision(rows):
    # mutation caught: the window ending on its step-time precision alone (windows of 20 steps
    # that leave B_noise known to +-50%)
    sc = scenario(rows, "time")
    ended = []
    search = Search(sc.backend(0), sc.settings(), [lambda e: ended.append((e.probe, search.noise.rel_se))])
    search.run(default_start(rows))
    s = search.settings
    probes = [(p, se) for p, se in ended[s.profile_configs:] if not p.cut_short]
    assert probes and all(p.steps >= s.max_window_steps or se <= s.noise_target_rel_se for p, se in probes)
    assert max(p.steps for p, _ in probes) > 5 * s.min_window_steps  # some waited for the noise
    assert ended[s.profile_configs - 1][1] > s.noise_target_rel_se  # the profile alone is too short


def test_a_probe_without_a_feasible_incumbent_does_not_wait_for_the_noise(rows):
    # mutation caught: every probe window waiting for the pooled noise precision (a probe of the
    # fastest, dearest configuration while nothing measured meets the deadline ran 400 steps:
    # the noise scale is the job's, measured as well on the configuration the job settles on)
    fastest = min(rows, key=lambda r: r.step_time_s)
    sc = scenario(rows, "cost", deadline_s=1.0)  # nothing can meet it: no feasible incumbent
    search = Search(sc.backend(0), sc.settings())
    start = default_start(rows)
    for config in search.profile_configs(start):
        search.window(config, cut=False, noise_precision=False)
    assert search.noise.rel_se > search.settings.noise_target_rel_se
    search.window(fastest.config)
    assert search.probes[-1].steps < 3 * search.settings.min_window_steps


def _settled_moves(search: Search, first: list[Config] | None = None) -> list[Config]:
    """Record the configurations the search moves to after it first settled (and, in `first`,
    the one it first settled on)."""
    moves, launch = [], search.launch

    def recording(config: Config) -> None:
        if search.settled and first is not None and not first:
            first.append(config)
        if search.settled and search.backend.current not in (None, config):
            moves.append(config)
        launch(config)

    search.launch = recording
    return moves


def test_a_growing_noise_scale_is_followed_to_a_larger_global_batch(rows):
    # mutations caught: no re-check after settling (one train-to-the-end); the estimate over every
    # step since the start (no forgetting: at the end it lags far behind a 16x growth)
    for seed in range(3):
        sc = drifting(rows)
        search = Search(sc.backend(seed), sc.settings())
        first_settled: list[Config] = []
        moves = _settled_moves(search, first_settled)
        outcome = search.run(default_start(rows))
        assert search.noise.value == pytest.approx(sc.schedule.at(TARGET), rel=0.35)
        assert moves  # it moved after settling
        assert outcome.final_config.global_batch > first_settled[0].global_batch
        fixed = Search(sc.backend(seed), replace(sc.settings(), recheck_every=None)).run(default_start(rows))
        assert outcome.time_s < fixed.time_s


@pytest.mark.parametrize("kind", ["cost", "time"])
def test_a_constant_noise_scale_causes_no_move_after_settling(rows, kind):
    # mutation caught: re-running the rule at every re-check (the estimate's noise alone sets off
    # probes and moves), or a drift test without the decided estimate's own error
    for seed in range(6):
        sc = scenario(rows, kind)
        search = Search(sc.backend(seed), sc.settings())
        moves = _settled_moves(search)
        search.run(default_start(rows))
        assert len(moves) <= 2, moves  # settling, and at most one re-decision once B_noise is known


def test_a_search_killed_after_settling_resumes_to_the_uninterrupted_result(rows, tmp_path):
    # mutation caught: the noise estimator's sums left out of the checkpoint (the resumed search
    # decides on another noise scale)
    sc, start = drifting(rows), default_start(rows)
    settled = []
    search = Search(sc.backend(0), sc.settings(), [lambda e: settled.append(search.settled)])
    whole = search.run(start)
    after = [i for i, s in enumerate(settled) if s]  # probes the drift set off after settling
    assert after
    for kill_after in (after[0], after[0] + 1):  # just before settling, and after a settled probe

        def killer(event, kill_after=kill_after):
            if event.index + 1 == kill_after:
                raise KeyboardInterrupt

        with Store(tmp_path / f"t{kill_after}.db") as store:
            with pytest.raises(KeyboardInterrupt):
                run_search(sc, 0, start, store, listeners=[killer])
            resumed, _ = run_search(sc, 0, start, store, resume=True)
        assert resumed.to_dict() == whole.to_dict()


def test_settled_the_rule_runs_again_once_the_noise_variance_halved(rows):
    # mutation caught: re-deciding only on a drift (a decision taken on B_noise known to 18% stood
    # for the rest of the job although the settled windows brought it to 10%: the memory-cliff
    # trace then trained at B = 256 where B = 512 is 6% faster)
    from types import SimpleNamespace
    search = Search(scenario(rows).backend(0), scenario(rows).settings())
    search.noise_decided = (700.0, 0.18)
    search.noise = SimpleNamespace(value=800.0, rel_se=0.12)
    assert search.drifted()
    search.noise = SimpleNamespace(value=800.0, rel_se=0.15)
    assert not search.drifted()


def test_a_prior_ten_times_off_still_ends_on_the_oracle_configuration(rows):
    # mutation caught: the prior always winning over the measurement (the search optimises the job
    # the prior describes: a 10x larger B_noise favours a larger batch)
    sc = scenario(rows, "time")
    best = oracle(sc)
    for seed in range(3):
        settings = replace(sc.settings(), noise_prior=NoiseSchedule.constant(10 * NOISE_SCALE, TARGET))
        outcome = Search(sc.backend(seed), settings).run(default_start(rows))
        assert outcome.final_config == best.final_config
