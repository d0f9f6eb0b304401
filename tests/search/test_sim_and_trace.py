# SPDX-License-Identifier: MIT
import numpy as np
import pytest

from thrifty.catalog import load_catalog
from thrifty.errors import ThriftyError
from thrifty.search.config import Config
from thrifty.search.noise_schedule import NoiseSchedule
from thrifty.search.sim import SimBackend
from thrifty.search.trace import TraceRow, load_trace, parse_trace, write_trace

HEADER = "instance_type,num_nodes,num_workers,local_batch,step_time_s"


def backend(**knobs):
    rows = [TraceRow(Config("a", 1, 1, 64), 0.5, None, 3.6), TraceRow(Config("a", 2, 2, 128), 0.5, 0.1, 7.2),
            TraceRow(Config("b", 1, 1, 64), 0.25, None, 7.2)]
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
    (f"{HEADER}\na,2,3,8,0.1\n", "multiple of num_nodes"),
    (f"{HEADER},price_per_hour\na,1,1,8,0.1,1\na,1,1,8,0.2,1\n", "appears twice"),
])
def test_a_bad_trace_is_one_error_naming_the_problem(tmp_path, body, message):
    path = tmp_path / "t.csv"
    path.write_text(body)
    with pytest.raises(ThriftyError, match=message):
        load_trace(path, [])
