# SPDX-License-Identifier: MIT
"""`thrifty plan` reports the configurations a stored `thrifty search` measured as measured: the
windows' step-weighted mean step time, its interval, and the label; everything else stays projected."""

import dataclasses
import json
import shutil

import numpy as np
import pytest

from thrifty.catalog import Hardware, load_catalog
from thrifty.plan.candidates import SEARCH_FLOOR, SEARCH_FLOOR_WITHOUT_SE, measured_steps, vm_names

TYPE = "c5.2xlarge"  # an AWS CPU type: plan projects it (the profile is of this machine, "local")
STEP_S = 0.0004  # far faster than its projection (about 10 ms a step here)


def _probe(step_time_s: float, steps: int = 40, se: float | None = 0.0002, *, instance_type: str = TYPE,
           nodes: int = 1, workers: int = 1, batch: int = 64, spot: bool = False) -> dict:
    return {"instance_type": instance_type, "num_nodes": nodes, "num_workers": workers, "global_batch": batch,
            "spot": int(spot), "steps": steps, "step_time_s": step_time_s, "step_time_se_s": se,
            "sync_time_s": None, "cost_usd": 0.01, "wall_time_s": steps * step_time_s, "billed_s": 60.0,
            "cut_short": 0}


def _store_search(store, workload: str, probes: list[dict]) -> None:
    from thrifty.workloads.names import workload_key
    search_id = store.start_search(workload_key(workload), f"request-{workload}-{len(probes)}", 0, {})
    for window, probe in enumerate(probes):
        store.save_search_window(search_id, window, probe, {"window": window})


@pytest.fixture()
def searched_db(profiled_db, tmp_path):
    """The shared digits profile plus stored searches: windows of aws:c5.2xlarge 1x1 B=64 for
    digits (one on spot, one of zero steps) and the same configuration, far slower, for tabular."""
    from thrifty.store import Store
    db = tmp_path / "searched.db"
    shutil.copy(profiled_db, db)
    with Store(db) as store:
        _store_search(store, "builtin:digits", [_probe(STEP_S, steps=30), _probe(STEP_S, steps=10, spot=True),
                                                _probe(99.0, steps=0, se=None)])
        _store_search(store, "builtin:tabular", [_probe(50.0), _probe(50.0, batch=128)])
    return db


def test_store_reads_back_the_measured_windows_of_one_workload(searched_db):
    from thrifty.store import Store
    from thrifty.workloads.names import workload_key
    with Store(searched_db) as store:
        digits = store.workload_probes(workload_key("builtin:digits"))
        tabular = store.workload_probes(workload_key("builtin:tabular"))
        assert store.workload_probes(workload_key("builtin:resnet18-cifar10")) == []
    assert [(p["window"], p["steps"], p["spot"]) for p in digits] == [(0, 30, 0), (1, 10, 1)]  # no 0-step window
    assert {p["step_time_s"] for p in tabular} == {50.0}


def test_windows_pool_step_weighted_with_a_floor_on_the_interval():
    table = measured_steps([_probe(1.0, steps=10, se=0.01), _probe(2.0, steps=30, se=0.02, spot=True),
                            _probe(7.0, steps=0), _probe(3.0, batch=128, se=None)])
    m = table[(TYPE, 1, 1, 64)]
    assert (m.windows, m.steps) == (2, 40) and m.step_time_s == pytest.approx(1.75)  # (10 x 1 + 30 x 2) / 40
    spread = np.sqrt(0.25 * 0.75**2 + 0.75 * 0.25**2)  # between the two windows
    sigma = np.hypot(np.hypot(0.25 * 0.01, 0.75 * 0.02), spread)
    assert m.high_s - m.step_time_s == pytest.approx(1.6449 * sigma, rel=1e-4)
    assert m.step_time_s - m.low_s == pytest.approx(m.high_s - m.step_time_s)
    single = measured_steps([_probe(1.0, se=1e-6)])[(TYPE, 1, 1, 64)]
    assert single.high_s == pytest.approx(1.0 + SEARCH_FLOOR)  # never narrower than +-2%
    no_se = table[(TYPE, 1, 1, 128)]
    assert (no_se.low_s, no_se.high_s) == pytest.approx((3.0 * (1 - SEARCH_FLOOR_WITHOUT_SE),
                                                        3.0 * (1 + SEARCH_FLOOR_WITHOUT_SE)))


def test_probe_names_match_catalog_types_without_guessing_gpus():
    from thrifty.plan import VMArrays
    vmx = VMArrays.build(load_catalog(), Hardware.load())
    names = vm_names(vmx)
    labels = {n: [vmx.vms[i].label for i in names.get(n, [])] for n in
              ("c5.2xlarge", "aws:c5.2xlarge", "n1-standard-4", "gcp:n1-standard-4",
               "gcp:n1-standard-4 (1x T4)", "p3.2xlarge", "no-such-type")}
    assert labels["c5.2xlarge"] == labels["aws:c5.2xlarge"] == ["aws:c5.2xlarge"]
    # a GCP N1 machine type is the host: its GPU attachments are named by their label only
    assert labels["n1-standard-4"] == labels["gcp:n1-standard-4"] == ["gcp:n1-standard-4"]
    assert labels["gcp:n1-standard-4 (1x T4)"] == ["gcp:n1-standard-4 (1x T4)"]
    assert labels["p3.2xlarge"] == ["aws:p3.2xlarge (1x V100)"] and labels["no-such-type"] == []


def test_plan_uses_the_workloads_search_windows_and_only_for_their_configuration(searched_db):
    from thrifty.pipeline import job_model
    from thrifty.plan import PlanRequest, VMArrays, plan
    from thrifty.store import Store
    from thrifty.workloads.names import workload_key
    with Store(searched_db) as store:
        job, _ = job_model(store, "builtin:digits")
        probes = store.workload_probes(workload_key("builtin:digits"))
        other = store.workload_probes(workload_key("builtin:tabular"))
    vmx = VMArrays.build(load_catalog(), Hardware.load())
    request = PlanRequest(max_workers=4)
    result = plan(vmx, job, request, probes)
    c = result.candidates
    vm = np.array([vmx.vms[i].label for i in c.vm_index])
    hit = (vm == f"aws:{TYPE}") & (c.nodes == 1) & (c.workers == 1) & (c.global_batch == 64)
    assert hit.sum() == 2 and set(c.spot[hit]) == {False, True}  # spot and on-demand: one step time
    assert np.all(c.step_time_s[hit] == pytest.approx(STEP_S)) and np.all(c.searched[hit] & c.measured[hit])
    assert not c.searched[~hit].any() and not c.measured[~hit].any()  # the rest (other batches too) projected
    for i in np.flatnonzero(hit):
        d = result.describe(int(i))
        assert (d["prediction"], d["source"]) == ("measured", "search")
        assert d["step_time_s"] == pytest.approx(STEP_S)
        assert d["predicted_time_interval_s"][0] <= d["predicted_time_s"] <= d["predicted_time_interval_s"][1]
    assert result.describe(int(np.flatnonzero(~hit)[0]))["source"] == "projection"
    # without the windows the same configuration is a (slower) projection: the lookup is what changed it
    bare = plan(vmx, job, request).candidates
    assert not bare.searched.any() and np.all(bare.step_time_s[hit] > 3 * STEP_S)
    assert np.array_equal(bare.step_time_s[~hit], c.step_time_s[~hit])
    # another workload's windows (tabular, 50 s a step) are not this workload's
    assert all(p["step_time_s"] == 50.0 for p in other)
    assert not np.any(np.isclose(c.step_time_s, 50.0))
    # the profiled machine keeps its fitted model even where a search window exists
    own = dataclasses.replace(job, profiled_instance_type=TYPE)
    c2 = plan(vmx, own, request, probes).candidates
    assert not c2.searched.any() and np.all(c2.measured[hit])


def test_plan_cli_labels_the_searched_configuration(searched_db, run_cli, tmp_path):
    args = ("plan", "--db", searched_db, "--plot", tmp_path / "p.png", "--cloud", "aws", "--cpu",
            "--max-workers", "1", "--batch", "64,128", "--spot", "never", "--top", "500")
    code, out, err = run_cli(*args, "--json")
    assert code == 0, err
    data = json.loads(out)
    (row,) = [r for r in data["top"] if (r["instance_type"], r["global_batch"]) == (TYPE, 64)]
    assert (row["nodes"], row["workers"], row["spot"]) == (1, 1, False)
    assert (row["prediction"], row["source"]) == ("measured", "search")
    assert row["step_time_s"] == pytest.approx(STEP_S) and data["search_windows"] == 2
    others = [r for r in data["top"] if r is not row]
    assert others and all((r["prediction"], r["source"]) == ("projected", "projection") for r in others)
    code, out, err = run_cli(*args)
    assert code == 0, err
    assert "srch" in out and "proj" in out
