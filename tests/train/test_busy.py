# SPDX-License-Identifier: MIT
"""A busy machine is detected (load, steal, spread between runs of one setting), measured again,
then refused in one line, unless allowed. The quiet direction is tested with injected readings,
so that a loaded CI machine cannot make it flake; the busy direction also with real busy loops."""

import subprocess
import time

import pytest

from thrifty.processes import procs_running
from thrifty.train.busy import (
    ALLOW_BUSY_ENV,
    BusyMachineError,
    CpuTimes,
    Readings,
    check_quiet,
    cores,
    measure_quietly,
    read_before_profile,
    runnable_outside,
)

QUIET = Readings(cores=2, others_load=0.2, steal_fraction=0.0, run_spread=None)


def QUIET_BESIDE():  # noqa: N802 (used as a factory, like the LoadBeside class it replaces)
    return _Beside(0.2)


@pytest.fixture(autouse=True)
def strict(monkeypatch):
    monkeypatch.delenv(ALLOW_BUSY_ENV, raising=False)  # the suite allows busy machines elsewhere


def _measure(spreads):
    calls = []

    def measure():
        calls.append(1)
        return f"profile {len(calls)}", spreads[len(calls) - 1]
    return measure, calls


def test_a_loaded_machine_is_refused_in_one_line_naming_why():
    # mutation caught: "busy check skipped" (check_quiet returns without raising)
    with pytest.raises(BusyMachineError) as caught:
        check_quiet(Readings(2, 3.9, 0.0, 0.41), allow_busy=False)
    message = str(caught.value)
    assert "\n" not in message
    assert "load 3.9 on 2 cores" in message and "differ by 41%" in message and "--allow-busy" in message
    with pytest.raises(BusyMachineError, match="12% of CPU time stolen"):
        check_quiet(Readings(2, 0.0, 0.12, None), allow_busy=False)


def test_load_counts_against_the_cores_the_profile_leaves_free():
    """On 2 cores the profile takes both, so a busy loop for most of it (0.9 beside: a user's loop
    started 8 s into a profile slowed its two-rank steps 1.7x) is busy; on 16 cores the same load
    sits on free cores. Mutations caught: the old limit of half of every core (1.0 on 2 cores);
    the profile's own cores not counted (16 cores would refuse any load over 0.5)."""
    assert Readings(2, 0.9, 0.0, None).reasons() == ["load 0.9 on 2 cores"]
    assert Readings(2, 0.4, 0.0, None).reasons() == []
    assert Readings(16, 13.0, 0.0, None).reasons() == []
    assert Readings(16, 14.6, 0.0, None).reasons() == ["load 14.6 on 16 cores"]
    assert Readings(16, 12.6, 0.0, None, profile_cores=4).reasons() == ["load 12.6 on 16 cores"]


def test_quiet_readings_are_accepted_and_stored():
    measure, calls = _measure([0.05])
    result, readings = measure_quietly(measure, False, before=lambda: QUIET, beside=QUIET_BESIDE)
    assert result == "profile 1" and len(calls) == 1 and readings["attempts"] == 1
    assert readings["before"]["busy"] is False and readings["during"]["run_spread"] == 0.05


def test_a_busy_machine_before_profiling_measures_nothing():
    measure, calls = _measure([0.0])
    with pytest.raises(BusyMachineError, match="load 3.0 on 2 cores"):
        measure_quietly(measure, False, before=lambda: Readings(2, 3.0, 0.0, None), beside=QUIET_BESIDE)
    assert calls == []


def test_a_run_whose_settings_differ_is_measured_again_then_refused():
    # mutation caught: "re-measure skipped" (attempts = 1) and "spread not checked"
    measure, calls = _measure([0.41, 0.03])
    result, readings = measure_quietly(measure, False, before=lambda: QUIET, beside=QUIET_BESIDE)
    assert result == "profile 2" and readings["attempts"] == 2
    measure, calls = _measure([0.41, 0.35])
    with pytest.raises(BusyMachineError, match="runs of one setting differ by 35%"):
        measure_quietly(measure, False, before=lambda: QUIET, beside=QUIET_BESIDE)
    assert len(calls) == 2


def test_allow_busy_measures_once_and_marks_the_readings_busy(monkeypatch):
    measure, calls = _measure([0.41])
    result, readings = measure_quietly(measure, True, before=lambda: Readings(2, 3.9, 0.0, None), beside=QUIET_BESIDE)
    assert len(calls) == 1 and readings["before"]["busy"] and readings["during"]["busy"]
    monkeypatch.setenv(ALLOW_BUSY_ENV, "1")
    check_quiet(Readings(2, 3.9, 0.0, 0.41), allow_busy=False)  # the environment allows it too


def test_steal_is_read_from_proc_stat(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 0 50 800 0 0 0 50 0 0\ncpu0 1 2 3\n")
    before = CpuTimes.read(str(stat))
    stat.write_text("cpu  200 0 100 1600 0 0 0 100 0 0\n")
    assert before.total == 1000 and CpuTimes.read(str(stat)).steal_since(before) == pytest.approx(0.05)
    assert CpuTimes.read(str(tmp_path / "none")).total == 0.0


def test_busy_loops_started_here_are_seen_as_load():
    # one loop more than cores: that many runnable tasks beside the reader, whatever else runs
    count = cores() + 1
    loops = [subprocess.Popen(["timeout", "60", "sh", "-c", "while :; do :; done"]) for _ in range(count)]
    try:
        readings = read_before_profile()
    finally:
        for loop in loops:
            loop.terminate()  # timeout passes TERM on to its loop (kill would orphan the loop)
            loop.wait()
    assert readings.others_load >= count - 0.5
    assert f"on {readings.cores} cores" in readings.reasons()[0]


class _Beside:
    """A LoadBeside whose reading is given."""

    def __init__(self, mean):
        self.mean = mean

    def __enter__(self):
        return self

    def __exit__(self, *_):
        return None


def test_load_that_arrives_during_the_profile_is_measured_again_then_refused():
    """The reading before is quiet, the one beside the profile is not (a neighbour's job started).
    Mutation caught: the load beside the profile not read (the busy run is kept)."""
    measure, calls = _measure([0.03, 0.03])
    with pytest.raises(BusyMachineError, match="load 3.0 on 2 cores"):
        measure_quietly(measure, False, before=lambda: QUIET, beside=lambda: _Beside(3.0))
    assert len(calls) == 2
    result, readings = measure_quietly(_measure([0.03])[0], True, before=lambda: QUIET, beside=lambda: _Beside(3.0))
    assert readings["during"]["others_load"] == 3.0 and readings["during"]["busy"]


def test_the_load_beside_counts_other_tasks_and_not_the_profiles_own():
    """Busy loops of this process's tree (as the profile's ranks are) are left out; loops outside
    it (started through a shell that exits: adopted by init) are counted. Both sets run at once and
    each reading is compared with /proc/stat's own count at the same moment, so a neighbour's load
    cancels. Mutations caught: the tree not subtracted; other processes' threads not counted."""
    import os
    import uuid
    count = cores() + 1
    marker = f"thrifty-load-beside-{uuid.uuid4().hex}"
    ours = [subprocess.Popen(["timeout", "60", "sh", "-c", "while :; do :; done"]) for _ in range(count)]
    subprocess.run(["sh", "-c", f"for i in $(seq {count}); do (timeout 60 sh -c 'while :; do :; done # {marker}' &); "
                                "done"], check=True)
    try:
        time.sleep(0.3)
        outside, everything = [], []
        for _ in range(10):
            running = procs_running()
            outside.append(runnable_outside(os.getpid()))
            everything.append(running)
            time.sleep(0.05)
    finally:
        for loop in ours:
            loop.terminate()
            loop.wait()
        subprocess.run(["pkill", "-f", marker], check=False)
    mean_outside, mean_all = sum(outside) / len(outside), sum(everything) / len(everything)
    assert mean_outside >= count - 0.5, (outside, everything)
    assert mean_all - mean_outside >= count - 0.5, (outside, everything)


def test_the_profile_command_refuses_a_busy_machine_with_exit_2_and_stores_nothing(
        monkeypatch, capsys, tmp_path):
    import thrifty.train.busy as busy
    from thrifty.cli.app import main
    monkeypatch.setattr(busy, "read_before_profile", lambda cores=2: Readings(2, 3.9, 0.0, None))
    db = tmp_path / "t.db"
    assert main(["profile", "--db", str(db), "--workers", "1", "--batch", "8,16", "--no-calibrate"]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and "the machine is busy: load 3.9 on 2 cores" in lines[0]
    assert not db.exists()


def test_a_busy_machine_is_refused_after_the_options_and_before_the_workload_loads(monkeypatch, capsys, tmp_path):
    """A new user's pass: a single --batch was refused only after the busy check (8-18 s, then "busy"),
    and the busy refusal came after the workload loaded and counted its work (21 s). Mutations caught:
    the options checked inside the measurement alone; the readings checked after the workload loads."""
    import thrifty.train.busy as busy
    import thrifty.workloads as workloads
    from thrifty.cli.app import main
    monkeypatch.setattr(busy, "read_before_profile", lambda cores=2: Readings(2, 3.9, 0.0, None))

    def not_now(spec):
        raise AssertionError("the workload was loaded before the refusal")
    monkeypatch.setattr(workloads, "load_workload", not_now)
    for options, why in ((["--batch", "16"], "give at least two different local batch sizes"),
                         (["--batch", "8,16"], "the machine is busy: load 3.9 on 2 cores")):
        assert main(["profile", "--db", str(tmp_path / "t.db"), "--workers", "1", *options, "--no-calibrate"]) == 2
        lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert len(lines) == 1 and why in lines[0], lines


def test_the_load_beside_a_profile_and_its_round_spread_make_its_launch_spread(monkeypatch):
    # mutations caught: "busy load not added to the launch spread", "round spread not added", the
    # load beside the profile ignored (only the reading before used), a busy profile's thread
    # scaling not flagged contended (perf.cpu)
    # (the pipeline's combination; the profile itself is injected, so nothing is timed)
    import math

    import thrifty.train.busy as busy
    import thrifty.train.profiler as profiler
    from thrifty.perf.uncertainty import busy_sigma_log
    from thrifty.pipeline import ProfileSettings, run_profile
    from thrifty.records import Profile, StepRow
    monkeypatch.setattr(busy, "read_before_profile", lambda cores=2: Readings(2, 6.0, 0.0, None))
    monkeypatch.setattr(busy, "LoadBeside", lambda: _Beside(9.0))  # more load arrived during the profile
    times = {8: [0.010, 0.010, 0.012, 0.012], 32: [0.030, 0.030, 0.033, 0.033]}  # 2 rounds of 2 steps

    def fake_profile(*args, **kwargs):
        rows = [StepRow(step=i, rank=0, num_workers=1, local_batch=b, global_batch=b, step_time_s=t)
                for b, ts in times.items() for i, t in enumerate(ts)]
        return Profile("digits", rows, 1, 1797, 1, meta={"steps": 4, "rounds": 2, "thread_scaling": {}})
    monkeypatch.setattr(profiler, "profile_workload", fake_profile)
    profile, _ = run_profile("builtin:digits", ProfileSettings(workers=(1,), local_batches=(8, 32), steps=4,
                                                              calibrate=False, allow_busy=True))
    rounds = math.sqrt((math.log(1.2) ** 2 / 2 + math.log(1.1) ** 2 / 2) / 2)  # pooled sd of 2 rounds
    assert profile.meta["run_sigma_log"] == pytest.approx(rounds)
    assert profile.meta["launch_sigma_log"] == pytest.approx(math.hypot(rounds, busy_sigma_log(9.0, 2)))
    assert profile.meta["machine"]["before"]["busy"] and profile.meta["run_spread"] == pytest.approx(0.15)
    assert profile.meta["thread_scaling"]["contended"]  # a busy profile's serial fraction: an upper bound


def test_a_quiet_profiles_thread_scaling_is_not_flagged_contended(monkeypatch):
    # mutation caught: every profile flagged contended (a CPU VM's interval would always reach T(1) / p)
    import thrifty.train.busy as busy
    import thrifty.train.profiler as profiler
    from thrifty.pipeline import ProfileSettings, run_profile
    from thrifty.records import Profile, StepRow
    monkeypatch.setattr(busy, "read_before_profile", lambda cores=2: Readings(2, 0.0, 0.0, None))
    monkeypatch.setattr(busy, "LoadBeside", lambda: _Beside(0.0))
    monkeypatch.setattr(busy.CpuTimes, "read", classmethod(lambda cls, path="": cls(0.0, 0.0)))  # no steal

    def fake_profile(*args, **kwargs):
        rows = [StepRow(step=i, rank=0, num_workers=1, local_batch=b, global_batch=b, step_time_s=0.001 * b)
                for b in (8, 32) for i in range(4)]
        return Profile("digits", rows, 1, 1797, 1, meta={"steps": 4, "rounds": 2, "thread_scaling": {}})
    monkeypatch.setattr(profiler, "profile_workload", fake_profile)
    profile, _ = run_profile("builtin:digits", ProfileSettings(workers=(1,), local_batches=(8, 32), steps=4,
                                                              calibrate=False, allow_busy=False))
    assert not profile.meta["machine"]["before"]["busy"] and not profile.meta["machine"]["during"]["busy"]
    assert profile.meta["thread_scaling"]["contended"] is False
