# SPDX-License-Identifier: MIT
import hashlib
import json

import numpy as np
import pytest

from thrifty.catalog import load_catalog
from thrifty.errors import ThriftyError
from thrifty.search.config import Config
from thrifty.search.harness import Scenario, oracle
from thrifty.search.noise_schedule import NoiseSchedule
from thrifty.search.sim import SimBackend
from thrifty.search.trace import Launch, TraceRow, load_trace, parse_trace, write_trace

HEADER = "instance_type,num_nodes,num_workers,local_batch,step_time_s"


def backend(**knobs):
    rows = [TraceRow(Config("a", 1, 1, 64), 0.5, None, 3.6), TraceRow(Config("a", 2, 2, 128), 0.5, 0.1, 7.2),
            TraceRow(Config("b", 1, 1, 64), 0.25, None, 7.2), TraceRow(Config("a", 1, 1, 128), 0.9, None, 3.6)]
    return SimBackend(rows, NoiseSchedule.constant(64, 1e5), **knobs)


def test_billing_is_per_second_with_a_one_minute_minimum_and_moves_cost_time():
    sim = backend(restart_cost_s=30, startup_cost_s=20, measurement_noise=0.0)
    sim.launch(Config("a", 1, 1, 64))
    assert sim.elapsed_s == 20 and sim.cost_usd == pytest.approx(3.6 * 60 / 3600)  # start-up, 1-minute minimum
    sim.measure(100)  # 50 s more: 70 s billed at $3.6/h
    assert sim.elapsed_s == pytest.approx(70) and sim.cost_usd == pytest.approx(3.6 * 70 / 3600)
    assert sim.progress == pytest.approx(100 * 32)  # B / (1 + B / B_noise) = 64 / 2
    assert sim.move_cost_s(sim.current, Config("a", 1, 1, 64)) == 0
    assert sim.move_cost_s(sim.current, Config("a", 2, 2, 128)) == 50  # more nodes: new VMs
    sim.launch(Config("b", 1, 1, 64))  # another type: restart + start-up, billed on b
    assert sim.elapsed_s == pytest.approx(120)
    assert sim.cost_usd == pytest.approx(3.6 * 70 / 3600 + 7.2 * 60 / 3600)


def test_a_change_of_the_batch_alone_is_taken_in_place():
    # mutation caught: a batch change priced or run as a restart (search.config.batch_change_only
    # ignored by the sim), or as a new VM's launch (its minimum billed again)
    sim = backend(restart_cost_s=30, startup_cost_s=20, batch_change_cost_s=4, measurement_noise=0.0)
    sim.launch(Config("a", 1, 1, 64))
    sim.measure(10)  # 20 + 5 s
    assert sim.move_cost_s(sim.current, Config("a", 1, 1, 128)) == 4
    assert sim.move_cost_s(sim.current, Config("a", 2, 2, 128)) == 50  # more workers: a relaunch
    sim.launch(Config("a", 1, 1, 128))
    assert sim.elapsed_s == pytest.approx(29)
    sim.measure(100)  # 90 s at 0.9: the VM's lifetime goes on, billed 119 s in all
    assert sim.cost_usd == pytest.approx(3.6 * 119 / 3600)


def test_a_window_measures_noisy_steps_around_the_trace_and_stops_at_the_target():
    sim = backend(seed=1)
    sim.launch(Config("a", 1, 1, 64))
    window = sim.measure(2000)
    assert np.mean(window.step_time_s) == pytest.approx(0.5, rel=0.01)
    assert np.std(np.log(window.step_time_s)) == pytest.approx(0.03, rel=0.1)
    sim.finish()
    assert sim.done and sim.progress == pytest.approx(1e5)
    assert len(sim.measure(10).step_time_s) == 0


def test_a_configuration_outside_the_trace_cannot_run():
    with pytest.raises(ThriftyError, match="not in the trace"):
        backend().launch(Config("a", 4, 4, 64))


def test_trace_prices_come_from_the_row_or_the_catalog(tmp_path):
    catalog = load_catalog()
    vm = catalog[0]
    rows = parse_trace([{"instance_type": vm.instance_type, "num_nodes": "2", "num_workers": "4",
                         "local_batch": "32", "step_time_s": "0.2"}], catalog, "t")
    assert rows[0].config == Config(vm.instance_type, 2, 4, 128)
    assert rows[0].price_per_hour == pytest.approx(2 * min(v.price_per_hour for v in catalog
                                                           if v.instance_type == vm.instance_type))
    path = tmp_path / "t.csv"
    write_trace(path, rows)
    assert load_trace(path, []) == rows
    # the name as the plan prints it, cloud:type, is priced too (mutation: bare names only)
    (row,) = parse_trace([{"instance_type": "aws:p3.2xlarge", "num_nodes": "1", "num_workers": "1",
                           "local_batch": "32", "step_time_s": "0.2"}], catalog, "t")
    assert row.price_per_hour == pytest.approx(min(v.price_per_hour for v in catalog
                                                   if (v.cloud, v.instance_type) == ("aws", "p3.2xlarge")))


@pytest.mark.parametrize("body, message", [
    ("instance_type,num_nodes,step_time_s\na,1,0.1\n", "missing columns num_workers, local_batch"),
    (f"{HEADER}\na,1,1,8,0\n", "step_time_s' must be positive"),
    (f"{HEADER}\na,1,1,8,-2\n", "step_time_s' must be positive"),
    (f"{HEADER}\na,1,1,8,x\n", "not a number"),
    (f"{HEADER}\nnot-a-vm,1,1,8,0.1\n", "not in the catalog"),
    (f"{HEADER},price_per_hour\na,3,2,8,0.1,1\n", "fewer than num_nodes"),
    (f"{HEADER},price_per_hour\na,1,1,8,0.1,1\na,1,1,8,0.2,2\n", ":3: .* one configuration, one price"),
    (f"{HEADER},sync_time_s,price_per_hour\na,2,2,8,0.1,0.05,1\na,2,2,8,0.2,,1\n", ":3: .* on all or none"),
])
def test_a_bad_trace_is_one_error_naming_the_problem(tmp_path, body, message):
    path = tmp_path / "t.csv"
    path.write_text(body)
    with pytest.raises(ThriftyError, match=message):
        load_trace(path, [])


def _records(text: str) -> list[dict]:
    lines = text.strip().splitlines()
    return [dict(zip(lines[0].split(","), line.split(","), strict=True)) for line in lines[1:]]


TWO_LAUNCHES = _records(f"""{HEADER},sync_time_s,price_per_hour
a,2,4,8,0.2,0.1,1
a,2,4,8,0.6,0.5,1
a,2,3,8,0.3,0.2,1
""")


def test_repeated_rows_are_launches_of_one_configuration_and_uneven_placements_parse(tmp_path):
    """Mutations caught: a repeated configuration refused or kept once (its last row), the mean
    taken over something else, an uneven placement refused or labelled as an even one."""
    rows = parse_trace(TWO_LAUNCHES, [], "t")
    assert [r.config for r in rows] == [Config("a", 2, 4, 32), Config("a", 2, 3, 24)]
    two, uneven = rows
    assert two.launches == (Launch(0.2, 0.1), Launch(0.6, 0.5))
    assert two.step_time_s == pytest.approx(0.4) and two.sync_time_s == pytest.approx(0.3)
    assert two.price_per_hour == 2 and uneven.launches == () and uneven.draws == (Launch(0.3, 0.2),)
    assert uneven.config.label() == "a 2n/3w B=24" and two.config.label() == "a 2x2 B=32"
    path = tmp_path / "t.csv"
    write_trace(path, rows)  # a row per launch, read back alike
    assert load_trace(path, []) == rows


def _landed(sim: SimBackend, steps: int = 400) -> float:
    return float(np.mean(sim.measure(steps).step_time_s))


def test_sim_draws_a_launch_each_time_a_configuration_is_launched():
    """Every launch of a configuration measured on several lands on one of them, as likely, and a
    relaunch draws again. Mutations caught: the mean (or the first launch) always; one draw kept
    for the configuration's every launch."""
    rows = parse_trace(TWO_LAUNCHES, [], "t")
    two, other = rows[0].config, rows[1].config
    landed, relaunched_elsewhere = [], 0
    for seed in range(40):
        sim = SimBackend(rows, NoiseSchedule.constant(64, 1e7), seed=seed)
        sim.launch(two)
        first = _landed(sim)
        sim.launch(other)
        sim.launch(two)
        second = _landed(sim)
        landed += [first, second]
        relaunched_elsewhere += round(first, 1) != round(second, 1)
        assert min(abs(first - 0.2), abs(first - 0.6)) < 0.01  # a launch, never the mean 0.4
    near_fast = sum(abs(x - 0.2) < 0.01 for x in landed)
    assert 25 <= near_fast <= 55  # of 80, each as likely
    assert relaunched_elsewhere >= 10


def test_the_oracle_and_a_restore_use_the_launch_they_should():
    """The oracle trains at the mean of the launches (the expectation), whatever the seed; a
    restored sim continues on the launch the saved one landed on. Mutations caught: the oracle
    drawing a launch; the landed launch not saved (a restore would take the mean)."""
    rows = parse_trace(TWO_LAUNCHES, [], "t")[:1]
    schedule = NoiseSchedule.constant(64, 1e6)
    mean_only = [TraceRow(rows[0].config, 0.4, 0.3, rows[0].price_per_hour)]
    assert oracle(Scenario(rows, schedule)).time_s == pytest.approx(oracle(Scenario(mean_only, schedule)).time_s)
    sim = SimBackend(rows, schedule, seed=2, measurement_noise=0.0)
    sim.launch(rows[0].config)
    landed = _landed(sim, 10)
    again = SimBackend(rows, schedule, seed=99, measurement_noise=0.0)
    again.restore(json.loads(json.dumps(sim.state())))  # as the database keeps it
    assert _landed(again, 10) == pytest.approx(landed) and landed in (pytest.approx(0.2), pytest.approx(0.6))


def test_a_configuration_of_one_launch_draws_nothing():
    """A trace of one launch a configuration replays as before launches existed: the generator's
    stream goes to step noise only. Mutation caught: a launch drawn for every launch."""
    sim = backend(seed=5)
    sim.launch(Config("a", 1, 1, 64))
    times = sim.measure(20).step_time_s
    expected = 0.5 * np.random.default_rng(5).lognormal(-0.03**2 / 2, 0.03, size=20)
    np.testing.assert_allclose(times, expected)


def test_the_default_start_takes_a_batch_rounded_by_an_uneven_split_as_the_middle_one():
    """The middle distinct global batch of a trace with uneven placements can be one only an odd
    worker count runs (511 = 7 x 73): the start is the cheapest configuration within NEAR_BATCH of
    it, the nearest on a tie. Mutation caught: the exact middle batch only (the
    start would be 2 nodes of 7 workers, not one node)."""
    from thrifty.search.harness import cheapest_start
    prices = {Config("a", 1, 1, 256): 1.0, Config("a", 1, 1, 512): 1.0, Config("a", 1, 1, 1024): 1.0,
              Config("a", 2, 7, 511): 2.0, Config("a", 2, 4, 512): 2.0}
    assert cheapest_start(prices) == Config("a", 1, 1, 512)
    assert cheapest_start({**prices, Config("a", 1, 1, 511): 1.0}) == Config("a", 1, 1, 511)
    # a trace of even placements keeps the exact middle batch (mutation: the window for all traces)
    even = {Config("a", 1, 1, 64): 1.0, Config("a", 1, 1, 96): 1.0, Config("b", 1, 1, 100): 0.5,
            Config("a", 1, 1, 128): 1.0}
    assert cheapest_start(even) == Config("a", 1, 1, 96)


def test_a_one_worker_configuration_may_give_its_sync_as_blank_on_one_launch_and_0_on_another():
    (row,) = parse_trace(_records(f"""{HEADER},sync_time_s,price_per_hour
a,1,1,8,0.1,0,1
a,1,1,8,0.2,,1
"""), [], "t")
    assert row.step_time_s == pytest.approx(0.15) and len(row.launches) == 2


def test_the_trace_key_keeps_one_launch_traces_and_tells_launches_apart():
    """A trace of one row a configuration keeps the key stored searches were filed under; two
    traces whose launches differ but whose means agree get different keys. Mutations caught: the
    launches hashed for every row (old searches no longer found); launches not hashed (a resume
    on another trace)."""
    from thrifty.search.harness import Scenario
    from thrifty.search.session import trace_key
    schedule = NoiseSchedule.constant(64, 1e5)
    rows = backend().rows.values()
    before = "trace:" + hashlib.sha256(json.dumps([[r.config.to_dict(), r.step_time_s, r.sync_time_s,
                                                    r.price_per_hour] for r in rows], sort_keys=True)
                                       .encode()).hexdigest()[:16]
    assert trace_key(Scenario(list(rows), schedule)) == before
    narrow = parse_trace(_records(f"{HEADER},price_per_hour\na,1,1,8,0.5,1\na,1,1,8,0.5,1\n"), [], "t")
    wide = parse_trace(_records(f"{HEADER},price_per_hour\na,1,1,8,0.25,1\na,1,1,8,0.75,1\n"), [], "t")
    assert narrow[0].step_time_s == wide[0].step_time_s == 0.5
    assert trace_key(Scenario(narrow, schedule)) != trace_key(Scenario(wide, schedule))
