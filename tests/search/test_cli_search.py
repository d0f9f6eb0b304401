# SPDX-License-Identifier: MIT
import json
import subprocess
import sys

import pytest
from search_support import NOISE_SCALE, TARGET

KEYS = {"time_s", "cost_usd", "oracle_time_s", "oracle_cost_usd", "overhead_time", "overhead_cost",
        "final_config", "probes", "moves", "moves_in_place"}


def args(trace, *more):
    return ["search", "--backend", "sim", "--trace", trace, "--target-samples", TARGET,
            "--noise-scale", NOISE_SCALE, *more]


def test_search_json_has_the_issues_keys_and_ends_near_the_oracle(run_cli, trace):
    code, out, _ = run_cli(*args(trace, "--objective", "time", "--json"))
    assert code == 0
    result = json.loads(out)
    assert KEYS <= set(result)
    assert set(result["final_config"]) == {"instance_type", "num_nodes", "num_workers", "global_batch", "spot"}
    assert result["probes"][0]["config"] == result["start_config"] and result["probes"][0]["steps"] >= 20
    # sim has no workload: the start is cheapest_start, the target and noise scale the options
    assert result["start_source"] == "cheapest" and result["start_predicted"] is None
    assert (result["target_samples"], result["noise_scale"]) == (TARGET, NOISE_SCALE)
    assert result["target_samples_source"] == result["noise_scale_source"] == "options"
    assert 0 <= result["overhead_time"] < 0.1
    assert result["time_s"] == pytest.approx(result["oracle_time_s"] * (1 + result["overhead_time"]))


def test_seeds_give_per_seed_results_and_medians(run_cli, trace):
    code, out, _ = run_cli(*args(trace, "--seeds", 3, "--json", "--deadline", "8h"))
    result = json.loads(out)
    assert code == 0 and len(result["per_seed"]) == 3
    assert [r["seed"] for r in result["per_seed"]] == [0, 1, 2]  # mutation caught: per-seed rows without their seed
    assert KEYS | {"p90_overhead_cost", "exploration_cost_usd"} <= set(result)
    assert all(KEYS <= set(r) for r in result["per_seed"])
    assert all(r["time_s"] <= 8 * 3600 for r in result["per_seed"])


def test_the_report_signs_each_overhead_once():
    # mutation caught: a literal "+" before a signed number (the report printed "+-72.9% cost"
    # for a time search that ended cheaper than its oracle)
    from thrifty.cli.search import versus_oracle
    assert versus_oracle(0.174, -0.729) == "+17.4% time, -72.9% cost vs the oracle"
    assert versus_oracle(-0.012, 0.0) == "-1.2% time, +0.0% cost vs the oracle"
    # a share that rounds to zero is +0.0% (mutation caught: -0.00001 printed "-0.0%")
    assert versus_oracle(-1e-5, -4e-4) == "+0.0% time, +0.0% cost vs the oracle"


def test_search_prints_a_short_report(run_cli, trace):
    code, out, _ = run_cli(*args(trace, "--start", "mid:2:2:128"))
    assert code == 0 and "start  mid 2x1 B=128" in out and "vs the oracle" in out and "ended on" in out
    # where the time outside the windows went (mutation caught: settled segments left out of the report)
    settled = next(line for line in out.splitlines() if line.startswith("settled "))
    assert "% of the target)" in settled and "$" in settled
    code, out, _ = run_cli(*args(trace, "--seeds", 2))
    assert code == 0 and "search median" in out
    assert "of 2 seeds; p90 " in " ".join(out.split())  # where the seeds ended, and the p90 beside the median


@pytest.mark.parametrize("change, message", [
    (("--start", "huge:1:1:64"), "instance type 'huge' is not in the trace"),
    (("--start", "mid:3:3:64"), "not in the trace, so it cannot run"),
    (("--start", "mid:x"), "TYPE:NODES:WORKERS:GLOBAL_BATCH"),
    (("--deadline", "1h"), "no configuration of the trace meets the deadline"),
    (("--objective", "speed"), "objective must be one of"),
    (("--backend", "Sim"), "unknown backend 'Sim': use sim or local"),
    # mutation caught: no bound (1e300 went through, numpy's overflow warnings printed)
    (("--noise-scale", "1e300"), "is not a positive number up to 1e+12"),
    (("--backend", "local"), "--backend local needs --workload"),
    (("--workload", "builtin:digits"), "--workload is for --backend local"),
    (("--backend", "local", "--seeds", "2"), "--seeds is for --backend sim"),
    # a new user's pass: ignored in silence (mutation caught: no check)
    (("--backend", "local", "--restart-cost", "5s"), "--restart-cost is for --backend sim"),
    (("--backend", "local", "--measurement-noise", "0.5", "--batch-change-cost", "1s"),
     "--measurement-noise, --batch-change-cost are for --backend sim"),
    (("--noise-scale-trace", "x.csv"), "one of --noise-scale or --noise-scale-trace"),
    (("--restart-cost", "soon"), "cannot read --restart-cost"),
])
def test_bad_input_is_one_line_and_exit_2(run_cli, trace, change, message):
    code, out, err = run_cli(*args(trace, *change))
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("body, reason", [
    ("instance_type,num_nodes\na,1\n", "missing column"),
    ("instance_type,num_nodes,num_workers,local_batch,step_time_s\na,1,1,8,0\n",
     "column 'step_time_s' must be positive, got 0"),
    ("instance_type,num_nodes,num_workers,local_batch,step_time_s,sync_time_s,price_per_hour\na,1,2,8,0.1,0.3,1\n",
     "sync_time_s (0.3) exceeds step_time_s (0.1): the sync is part of the step"),
    ("instance_type,num_nodes,num_workers,local_batch,step_time_s,sync_time_s,price_per_hour\na,1,2,8,0.1,-0.01,1\n",
     "column 'sync_time_s' must be 0 or more")])
def test_a_bad_trace_or_target_is_one_line_and_exit_2(run_cli, tmp_path, trace, body, reason):
    """Each refusal states its reason. Mutation caught: a message that loses it (the test asserted
    only the exit code and the one line before)."""
    bad = tmp_path / "bad.csv"
    bad.write_text(body)
    for argv, expected in ((args(bad), reason),
                           (["search", "--trace", trace, "--target-samples", 0, "--noise-scale", 10], "is not a positive number")):
        code, _, err = run_cli(*argv)
        assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
        assert expected in err, err


def test_a_one_worker_rows_sync_may_be_zero(tmp_path):
    # a trace that `thrifty model fit` also reads: one worker has no sync, written 0 (mutation
    # caught: sync_time_s held to be positive, which refused such a trace)
    from thrifty.search.trace import load_trace
    path = tmp_path / "t.csv"
    path.write_text("instance_type,num_nodes,num_workers,local_batch,step_time_s,sync_time_s,price_per_hour\n"
                    "a,1,1,8,0.1,0,1\na,1,2,8,0.12,0.02,1\n")
    rows = load_trace(path, [])
    assert [r.sync_time_s for r in rows] == [0.0, 0.02]


def test_the_report_says_whether_the_deadline_was_met(run_cli, trace):
    # mutation caught: a deadline missed in silence (the report said nothing of it, and the JSON
    # held only deadline_s)
    from thrifty.cli.search import deadline_line
    assert deadline_line(3 * 3600, [3 * 3600 + 150]) == "deadline 3 h: MISSED by 2.5 min"
    assert deadline_line(3 * 3600, [2.5 * 3600]) == "deadline 3 h: met, 30 min to spare"
    assert deadline_line(3600, [3000, 3700, 3900]) == "deadline 60 min: met by 1 of 3 seeds; the latest MISSED it by 5 min"
    code, out, _ = run_cli(*args(trace, "--deadline", "8h", "--seeds", 2, "--json"))
    result = json.loads(out)
    assert code == 0 and result["deadline_met"] == 1.0 and all(r["deadline_met"] for r in result["per_seed"])
    code, out, _ = run_cli(*args(trace, "--deadline", "8h"))
    assert code == 0 and "deadline 8 h: met," in out


def test_the_report_says_when_the_search_stayed_on_its_start(run_cli, trace):
    # a restart dearer than the job: the profile cannot recoup its moves (mutation caught: the
    # search staying with nothing said, a user's "0 moves" unexplained)
    code, out, _ = run_cli(*args(trace, "--restart-cost", "5h", "--batch-change-cost", "5h"))
    assert code == 0 and "it stayed on the start: the profile's moves" in " ".join(out.split())
    code, out, _ = run_cli(*args(trace))
    assert code == 0 and "stayed on the start" not in " ".join(out.split())


def test_the_report_says_how_many_moves_changed_the_batch_alone_in_place(run_cli, trace):
    # mutation caught: the in-place moves not counted (a user reads "5 moves" as five restarts)
    code, out, _ = run_cli(*args(trace, "--json"))
    result = json.loads(out)
    path = [result["start_config"], *(p["config"] for p in result["probes"])]
    changed = [(a, b) for a, b in zip(path[:-1], path[1:], strict=True) if a != b]
    batch_alone = sum(a["global_batch"] != b["global_batch"] and {k: v for k, v in a.items() if k != "global_batch"}
                      == {k: v for k, v in b.items() if k != "global_batch"} for a, b in changed)
    assert code == 0 and result["moves_in_place"] >= batch_alone >= 2  # the profile's two, at least
    code, out, _ = run_cli(*args(trace))
    assert code == 0 and "of them the batch alone, in place" in " ".join(out.split())


def test_the_report_says_why_the_search_settled(run_cli, tmp_path):
    """A short time job on cheap, slow VMs declines a faster type whose way there and back is over
    the move budget, and says so (a new user's pass: +264% over the oracle, not a word why).
    Mutations caught: the declined probe not kept (no `why`), the wrong check named."""
    rows = ["instance_type,num_nodes,num_workers,local_batch,step_time_s,price_per_hour"]
    rows += [f"slow,1,1,{b},{0.02 * b / 32:.4f},0.05" for b in (32, 64, 128)]
    rows += [f"fast,1,2,{b},{0.004 * b / 32:.4f},0.3" for b in (32, 64, 128)]
    trace = tmp_path / "trace.csv"
    trace.write_text("\n".join(rows) + "\n")
    common = ("search", "--trace", trace, "--target-samples", "2e6", "--noise-scale", "200", "--objective", "time")
    code, out, err = run_cli(*common, "--json")
    assert code == 0, err
    declined = json.loads(out)["declined"]
    assert declined["reason"] == "move budget" and declined["config"]["instance_type"] == "fast"
    assert declined["round_trip"] > declined["move_budget"] * declined["objective_left"]
    code, out, _ = run_cli(*common)
    assert code == 0 and "why    the best probe it declined, fast 1x2" in out
    assert "is over the move budget: 5% of the" in " ".join(out.split())


def test_a_local_search_profiles_on_a_busy_machine_with_allow_busy(run_cli, monkeypatch, tmp_path):
    """The busy refusal of the profile a local search runs says --allow-busy: search takes it (a newcomer's
    pass: "No such option"), and sim refuses it. Mutation caught: the option not passed to the profile."""
    import thrifty.cli.workload_job_model as job_models
    from thrifty.errors import ThriftyError
    seen = []

    def job_model(store, workload, *, allow_busy=False, **kwargs):
        seen.append(allow_busy)
        raise ThriftyError("stopped here")
    monkeypatch.setattr(job_models, "workload_job_model", job_model)
    code, _, err = run_cli("search", "--backend", "local", "--workload", "builtin:digits", "--allow-busy",
                           "--db", tmp_path / "t.db", "--work-dir", tmp_path / "w")
    assert code == 2 and "stopped here" in err and seen == [True]
    code, _, err = run_cli("search", "--trace", tmp_path / "none.csv", "--target-samples", "1e5", "--noise-scale", "100",
                           "--allow-busy")
    assert code == 2 and "--allow-busy is for --backend local" in err


def test_counts_read_as_counts():
    from thrifty.cli.search import counted
    assert [counted(1, "window"), counted(3.0, "window"), counted(2.5, "move")] == ["1 window", "3 windows", "2.5 moves"]


def test_search_runs_where_torch_cannot_be_imported(trace):
    # the decision rule and the sim are numpy/scipy only (docs/design.md: search's decision rule is torch-free)
    blocker = ("import sys\nclass B:\n    def find_spec(self, name, path=None, target=None):\n"
               "        if name.split('.')[0] in ('torch', 'openmm', 'ray'):\n"
               "            raise ImportError('blocked')\nsys.meta_path.insert(0, B())\n")
    argv = [str(a) for a in args(trace, "--json")]
    done = subprocess.run([sys.executable, "-c", blocker + f"from thrifty.cli.app import main; sys.exit(main({argv!r}))"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["overhead_cost"] >= 0


def test_sim_needs_the_target_and_noise_scale_it_has_no_workload_for(run_cli, trace):
    for more in (("--noise-scale", 10), ("--target-samples", 1e5)):
        code, _, err = run_cli("search", "--trace", trace, *more)
        assert code == 2 and "--backend sim needs --target-samples and one of --noise-scale" in err
        assert len(err.strip().splitlines()) == 1


def test_search_start_takes_the_cloud_prefix_the_plan_prints():
    """`search --start aws:p3.2xlarge:1:1:32`. Mutation: the 5-part form not read (an error)."""
    from thrifty.cli.search import _start
    from thrifty.search.config import Config
    prices = {Config("p3.2xlarge", 1, 1, 32): 3.06}
    assert _start("aws:p3.2xlarge:1:1:32", prices, "the trace") == Config("p3.2xlarge", 1, 1, 32)
    assert _start("p3.2xlarge:1:1:32", prices, "the trace") == Config("p3.2xlarge", 1, 1, 32)
    from thrifty.errors import ThriftyError
    for typo in ("p3.2xlarge:1:1:32:x", "p3.2xlarge:1::32", "p3.2xlarge:1:32", "p3.2xlarge:1:1:3\u00b2"):  # a pass: "instance type '1'"
        with pytest.raises(ThriftyError, match="--start must be TYPE:NODES:WORKERS:GLOBAL_BATCH"):
            _start(typo, prices, "the trace")


def test_search_start_takes_a_bare_type_where_the_trace_names_its_cloud():
    """A trace naming `aws:p3.2xlarge` takes `--start p3.2xlarge:...` (the one cloud that has it),
    and a bare name two clouds share is still refused. Mutation caught: the bare name refused."""
    from thrifty.cli.search import _start
    from thrifty.errors import ThriftyError
    from thrifty.search.config import Config
    prices = {Config("aws:p3.2xlarge", 1, 1, 32): 3.06, Config("aws:g4dn.xlarge", 1, 1, 32): 0.53}
    assert _start("p3.2xlarge:1:1:32", prices, "the trace") == Config("aws:p3.2xlarge", 1, 1, 32)
    shared = {Config("aws:n1", 1, 1, 32): 1.0, Config("gcp:n1", 1, 1, 32): 1.0}
    with pytest.raises(ThriftyError, match="'n1' is on several clouds in the trace: give one of aws:n1, gcp:n1"):
        _start("n1:1:1:32", shared, "the trace")


def test_a_trace_of_launches_and_uneven_placements_runs(run_cli, tmp_path):
    """Repeated rows of a configuration (its launches) and workers that do not fill their nodes
    evenly are a trace the sim replays, and --start takes the uneven placement. Mutation caught:
    either refused as a bad trace."""
    path = tmp_path / "t.csv"
    path.write_text("instance_type,num_nodes,num_workers,local_batch,step_time_s,sync_time_s,price_per_hour\n"
                    "a,1,1,32,0.10,,1\na,1,1,64,0.19,,1\na,2,3,64,0.12,0.03,1\n"
                    "a,2,3,32,0.06,0.02,1\na,2,3,32,0.09,0.05,1\n"
                    "a,2,4,32,0.05,0.02,1\na,2,4,32,0.07,0.04,1\na,2,4,32,0.05,0.02,1\n")
    code, out, err = run_cli("search", "--backend", "sim", "--trace", path, "--target-samples", "1e6",
                             "--noise-scale", "500", "--start", "a:2:3:96", "--objective", "time", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert (result["start_config"]["num_nodes"], result["start_config"]["num_workers"]) == (2, 3)
    assert result["oracle_time_s"] > 0 and result["final_config"]["instance_type"] == "a"
