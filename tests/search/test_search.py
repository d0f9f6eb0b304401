# SPDX-License-Identifier: MIT
"""Behaviour of the search on synthetic traces. Each test names the mutation of the code it
catches (checked by applying the mutation by hand and watching the test fail)."""

import json
from dataclasses import replace

import numpy as np
import pytest
from search_support import NOISE_SCALE, scenario

from thrifty.search.belief import Measured
from thrifty.search.config import batch_change_only
from thrifty.search.harness import Scenario, default_start, oracle, run_strategy
from thrifty.search.loop import Outcome, Search
from thrifty.search.noise_schedule import NoiseSchedule
from thrifty.search.rule import Objective
from thrifty.search.synthetic import VMSpec, synthetic_trace

SEEDS = range(4)


@pytest.mark.parametrize("kind", ["cost", "time"])
def test_the_search_settles_on_the_known_best_configuration_within_eight_percent(rows, kind):
    # (this job is short, 4.5-12 h: a move is ~1% of it; benchmarks/bench_search.py measures overheads)
    # mutations caught: drop the efficiency term (steps left = progress left / B), or settle on
    # the last probe instead of the best measured
    sc = scenario(rows, kind)
    best = oracle(sc)
    runs = [run_strategy(sc, "search", s, default_start(rows)) for s in SEEDS]
    assert [r.final_config for r in runs] == [best.final_config] * len(runs)
    value = [r.cost_usd if kind == "cost" else r.time_s for r in runs]
    assert np.median(value) / (best.cost_usd if kind == "cost" else best.time_s) - 1 < 0.08


def test_nothing_beats_the_oracle_beyond_measurement_noise(rows):
    # mutation caught: the oracle chosen by the other objective (test_sim_and_trace catches
    # windows that train for free)
    for kind in ("cost", "time"):
        sc = scenario(rows, kind)
        best = oracle(sc)
        for name in ("search", "random", "exhaustive", "plan_alone"):
            runs = [run_strategy(sc, name, s, default_start(rows), probe_windows=7) for s in SEEDS]
            assert np.mean([r.time_s for r in runs]) >= best.time_s * 0.999 or kind == "cost"
            assert np.mean([r.cost_usd for r in runs]) >= best.cost_usd * 0.999 or kind == "time"


def test_the_search_probes_few_configurations_and_beats_exhaustive_profiling(rows):
    # mutation caught: never stop exploring (probe while any configuration is unmeasured)
    sc = scenario(rows, "time")
    best = oracle(sc)
    search = [run_strategy(sc, "search", s, default_start(rows)) for s in SEEDS]
    exhaustive = [run_strategy(sc, "exhaustive", s, default_start(rows)) for s in SEEDS]
    assert max(len(r.probes) for r in search) <= len(rows) // 4
    assert np.median([r.time_s for r in search]) - best.time_s < \
        0.5 * (np.median([r.time_s for r in exhaustive]) - best.time_s)


def _restarts(start, probes) -> int:
    """Moves among `probes` (from `start`) that needed a restart: not a batch change in place."""
    path = [start, *(p.config for p in probes)]
    return sum(a != b and not batch_change_only(a, b) for a, b in zip(path[:-1], path[1:], strict=True))


def test_a_move_dearer_than_any_gain_is_never_probed(rows):
    # mutation caught: ignore the move's cost in the probe's price (the profile's and the probe's
    # move budget are off here: test_a_profile_that_cannot_recoup_its_moves_is_skipped covers them);
    # batch changes on the start's VMs stay cheap, in place, and may be probed
    sc = scenario(rows, "cost", restart_cost_s=5 * 3600)
    settings = replace(sc.settings(), move_budget=np.inf)
    search = Search(sc.backend(0), settings).run(default_start(rows))
    assert len(search.probes) >= 3 and _restarts(default_start(rows), search.probes) == 0


def test_a_profile_that_cannot_recoup_its_moves_is_skipped(rows):
    # mutation caught: the profile's recoup check removed (three windows, two 5-hour pauses)
    sc = scenario(rows, "cost", restart_cost_s=5 * 3600, batch_change_cost_s=5 * 3600)
    search = run_strategy(sc, "search", 0, default_start(rows))
    assert len(search.probes) == 1 and search.moves == 0
    assert search.final_config == default_start(rows)


def _short_job(rows, kind: str, settings=None):
    """1e6 samples (a 14-38 minute job), started on the oracle's configuration."""
    sc = Scenario(rows, NoiseSchedule.constant(NOISE_SCALE, 1e6), Objective(kind))
    best = oracle(sc)
    runs = [Search(sc.backend(s), settings or sc.settings()).run(best.final_config) for s in SEEDS]
    return best, runs


@pytest.mark.parametrize("kind", ["cost", "time"])
def test_a_short_job_started_on_the_best_stays_there(rows, kind):
    # mutation caught: the profile's recoup check removed while batch changes cost as much as a
    # restart (3-4 moves, +21% over the oracle); with them in place the profile is cheap and runs
    best, runs = _short_job(rows, kind)
    assert all(_restarts(best.final_config, r.probes) == 0 for r in runs)  # batch changes in place, if any
    value = [r.cost_usd / best.cost_usd if kind == "cost" else r.time_s / best.time_s for r in runs]
    assert np.median(value) - 1 < 0.025
    sc = Scenario(rows, NoiseSchedule.constant(NOISE_SCALE, 1e6), Objective(kind), batch_change_cost_s=60.0)
    runs = [Search(sc.backend(s), sc.settings()).run(best.final_config) for s in SEEDS]
    assert np.median([r.moves for r in runs]) == 0  # a batch change as dear as a restart: no profile


def test_a_probe_whose_round_trip_exceeds_the_move_budget_is_not_taken():
    # a short time job (17 min at the oracle) on a cheap type, beside a type 4x its price that the
    # price-parity prior takes for 4x faster and that is truly 0.9x: the probe there and back (a
    # restart and a start-up, then a restart: 180 s) is 17% of the job. Mutation caught: the round
    # trip's budget removed (the probe is taken: +23% over the oracle)
    rows = synthetic_trace([VMSpec("here", 1.0, 1.0), VMSpec("dear", 4.0, 0.9)], [1, 2], [64, 128, 256, 512])
    sc = Scenario(rows, NoiseSchedule.constant(NOISE_SCALE, 3e5), Objective("time"))
    best = oracle(sc)
    assert best.final_config.instance_type == "here"
    search = Search(sc.backend(0), sc.settings()).run(best.final_config)
    assert _restarts(best.final_config, search.probes) == 0
    assert search.time_s / best.time_s - 1 < 0.03


def test_a_probe_must_expect_to_recoup_its_price_with_a_margin(rows):
    # mutation caught: the recoup factor removed (gain > price alone: a short job whose profile
    # ran goes on to probe, 6-8 moves instead of at most 4)
    sc = Scenario(rows, NoiseSchedule.constant(NOISE_SCALE, 1e6), Objective("cost"))
    _, runs = _short_job(rows, "cost", replace(sc.settings(), move_budget=np.inf))
    assert max(r.moves for r in runs) <= 4


def test_a_probe_is_cut_short_once_its_interval_excludes_it(rows):
    # mutation caught: never cut (the threshold ignored), or cut before a second chunk
    sc = scenario(rows, "time")
    search = Search(sc.backend(0), sc.settings())
    for config in search.profile_configs(default_start(rows)):
        search.window(config, cut=False)
    slow = max((r for r in rows if r.config not in search.times),
               key=lambda r: r.step_time_s * (1 / r.config.global_batch + 1 / 500)).config
    search.window(slow)
    probe = search.probes[-1]
    assert probe.config == slow and probe.cut_short and probe.steps == 2 * sc.settings().chunk_steps
    fine = search.probes[0]
    assert not fine.cut_short and fine.steps >= sc.settings().min_window_steps
    assert Measured.of(np.ones(3)).rel_se == 0.0


def test_a_profile_window_far_worse_than_the_start_is_cut_short(rows):
    # mutation caught: the profile's windows never cut (cut=False in Search.run): the largest
    # batch on the slowest type ran its 20 steps though its first 10 showed it far behind
    sc = scenario(rows, "time")
    start = default_start(rows)
    search = Search(sc.backend(0), sc.settings())
    search.run(start)
    profile = search.probes[:len(search.profile_configs(start))]
    assert not profile[0].cut_short  # the start: nothing to compare with
    far = max(profile[1:], key=lambda p: p.config.global_batch)
    assert far.cut_short and far.steps == 2 * sc.settings().chunk_steps


def test_a_deadline_is_met_and_changes_the_choice(rows):
    # mutation caught: the deadline left out of the feasibility bound x_max
    unconstrained = oracle(scenario(rows, "cost"))
    deadline_s = 0.6 * unconstrained.time_s
    sc = scenario(rows, "cost", deadline_s)
    best = oracle(sc)
    assert best.final_config != unconstrained.final_config
    runs = [run_strategy(sc, "search", s, default_start(rows)) for s in SEEDS]
    assert all(r.time_s <= deadline_s for r in runs)
    assert np.median([r.cost_usd for r in runs]) / best.cost_usd - 1 < 0.08


def test_baselines_measure_what_they_promise(rows):
    sc = scenario(rows, "cost")
    start = default_start(rows)
    assert len(run_strategy(sc, "plan_alone", 0, start).probes) == 3
    assert len(run_strategy(sc, "random", 0, start, probe_windows=6).probes) == 6
    assert len(run_strategy(sc, "exhaustive", 0, start).probes) == len(rows)
    ernest = run_strategy(sc, "ernest", 0, start)
    assert {p.config.instance_type for p in ernest.probes} == {"small", "mid", "big"}
    most = run_strategy(sc, "defaults_most_workers", 0, start)
    assert most.final_config.num_workers == 8 and most.final_config.global_batch == start.global_batch
    assert run_strategy(sc, "defaults_cheapest", 0, start).final_config == start


def test_the_loop_bounds_multi_node_candidates_by_their_measured_one_node_twin(rows):
    # mutation caught: the loop's outlook built without step_time_floor
    from thrifty.search.belief import Z90
    from thrifty.search.config import Config
    s = scenario(rows)
    search = Search(s.backend(0), s.settings())
    for config in (Config("small", 1, 1, 64), Config("small", 1, 1, 256)):
        search.window(config, cut=False)
    o, _ = search._outlook(s.objective)
    twin = search.measured()[Config("small", 1, 1, 64)]
    at = search.candidates.index(Config("small", 2, 2, 128))
    assert o.floor[at] == pytest.approx(np.log(twin.mean_s) - Z90 * twin.rel_se)


def test_a_job_without_a_stated_noise_scale_takes_the_start_batch_as_its_prior(rows):
    # mutation caught: the pooled estimate alone (after a one-rank profile it rests on a handful
    # of measured steps, 0 or infinite: the job settled on the largest batch for good)
    sc = scenario(rows, "cost")
    search = Search(sc.backend(0), replace(sc.settings(), noise_prior=None))
    start = default_start(rows)
    search.start_batch = start.global_batch
    for config in search.profile_configs(start):
        search.window(config, cut=False, noise_precision=False)
    assert search.noise.steps < 50
    assert search.noise_scale() == start.global_batch


def test_a_sim_job_decides_on_its_stated_noise_scale_until_the_measurement_weighs_in(rows):
    # mutation caught: the sim's settings without the job's noise schedule as the prior (the
    # search then took the start's batch, 256, for a job whose stated B_noise is 500)
    sc = scenario(rows, "cost")
    search = Search(sc.backend(0), sc.settings())
    search.start_batch = default_start(rows).global_batch
    for config in search.profile_configs(default_start(rows)):
        search.window(config, cut=False, noise_precision=False)
    assert search.noise.steps < 50
    assert search.noise_scale() == sc.schedule.at(search.backend.progress) != search.start_batch


def test_a_settled_window_never_outlasts_its_segment(rows):
    # mutation caught: the settled window's 3,200 steps uncapped (at batch 1,024 they are the
    # whole of this job: no re-check would ever run)
    sc = Scenario(rows, NoiseSchedule.constant(NOISE_SCALE, 2e6), Objective("time"))
    best = oracle(sc)
    search = Search(sc.backend(0), sc.settings())
    at, segment = [], search.settled_segment

    def recording(decide: bool) -> None:
        at.append(search.backend.progress / search.backend.target)
        segment(decide)

    search.settled_segment = recording
    search.run(best.final_config)
    assert len(at) >= 19 and max(np.diff(at)) < 0.052  # a segment ends on a whole step


def test_the_search_logs_each_move_and_a_profile_it_gave_up(rows, caplog):
    # mutation caught: a move taken without its log record (the count of "move" records would fall
    # short of search.moves), or the stay on the start not said
    import logging
    sc = scenario(rows, "cost")
    with caplog.at_level(logging.INFO, logger="thrifty.search.loop"):
        search = Search(sc.backend(0), sc.settings()).run(default_start(rows))
    moves = [r.getMessage() for r in caplog.records if r.getMessage().startswith("move ")]
    assert search.moves > 0 and len(moves) == search.moves
    assert moves[-1].split(" -> ")[1].startswith(search.final_config.label())
    caplog.clear()
    far = scenario(rows, "cost", restart_cost_s=5 * 3600, batch_change_cost_s=5 * 3600)
    with caplog.at_level(logging.INFO, logger="thrifty.search.loop"):
        stayed = run_strategy(far, "search", 0, default_start(rows))
    assert any("could not recoup its moves; staying on " + default_start(rows).label() in r.getMessage()
               for r in caplog.records)
    # the outcome says so too, and keeps it through the database's JSON (mutation caught: the
    # report's "stayed on the start" line with nothing to read it from)
    assert stayed.stayed and not search.stayed
    assert Outcome.from_dict(json.loads(json.dumps(stayed.to_dict()))).stayed


def _after_profile(rows, **knobs) -> Search:
    """A time search whose profile (one worker on the start's type) was measured."""
    sc = scenario(rows, "time")
    search = Search(sc.backend(0), replace(sc.settings(), **knobs))
    for config in search.profile_configs(default_start(rows)):
        search.window(config, cut=False)
    return search


def _rigged(monkeypatch, search: Search, gains: dict, price: float = 10.0) -> None:
    """The rule's expected gain and chance of winning per candidate as given ({config: (gain,
    chance)}, nothing for the rest), every price `price`."""
    import thrifty.search.loop as loop
    index = {c: i for i, c in enumerate(search.candidates)}
    gain, win = np.zeros(len(index)), np.zeros(len(index))
    for config, (g, w) in gains.items():
        gain[index[config]], win[index[config]] = g, w
    monkeypatch.setattr(loop, "expected_improvement", lambda y, o: (gain, win))
    monkeypatch.setattr(loop, "probe_price", lambda *a, **k: np.full(len(index), price))


def test_a_long_shot_that_fails_the_recoup_check_does_not_hide_one_that_passes(rows, monkeypatch):
    # mutation caught: the recoup check applied to argmax(gain - price) only (the long shot, net
    # 90 but 100 x 0.1 < 3 x 10, is declined and with it every probe)
    search = _after_profile(rows)
    unmeasured = [c for c in search.candidates if c not in search.times and c.num_workers == 1]
    long_shot, sure = unmeasured[0], unmeasured[1]
    _rigged(monkeypatch, search, {long_shot: (100.0, 0.1), sure: (50.0, 0.9)})
    assert search.next_probe() == sure
    _rigged(monkeypatch, search, {long_shot: (100.0, 0.1)})
    assert search.next_probe() is None



@pytest.mark.parametrize("kind", ["cost", "time"])
def test_the_windows_and_the_settled_segments_account_for_all_the_time_and_cost(rows, kind):
    # mutations caught: a settled segment not recorded (the re-checks' segments, or the last one
    # to the end), its move left out, or consecutive segments on one configuration not merged
    sc = scenario(rows, kind)
    for seed in SEEDS:
        run = run_strategy(sc, "search", seed, default_start(rows))
        assert run.settled and run.settled[-1].config == run.final_config
        assert sum(p.wall_time_s for p in run.probes) + sum(s.wall_time_s for s in run.settled) == \
            pytest.approx(run.time_s, rel=1e-9)
        assert sum(p.cost_usd for p in run.probes) + sum(s.cost_usd for s in run.settled) == \
            pytest.approx(run.cost_usd, rel=1e-9)
        assert 0 < sum(s.progress for s in run.settled) < 1
        places = [(s.config, s.after_windows) for s in run.settled]
        assert len(set(places)) == len(places)
        assert Outcome.from_dict(json.loads(json.dumps(run.to_dict()))) == run
