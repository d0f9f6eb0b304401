# SPDX-License-Identifier: MIT
"""The preemption-tolerant runner with real processes: restarts, notices, corrupt checkpoints."""

import json
import os
import re
import signal
import statistics
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from thrifty.checkpoint_file import decode, encode
from thrifty.errors import ThriftyError
from thrifty.folder_lock import open_lock, take, write_holder
from thrifty.transient.adaptive import AdaptiveSchedule
from thrifty.transient.lifetimes import Exponential
from thrifty.transient.protocol import PREEMPTED_EXIT, REPORTS, JobCheckpoints, checkpoint_files
from thrifty.transient.registry import load_model
from thrifty.transient.runner import (
    FRUITLESS_LIFE_S,
    LOCK_NAME,
    Runner,
    RunnerError,
    shell_exit_code,
)
from thrifty.transient.schedule import Job, plan_schedule, young_interval_s

COUNTER_JOB = textwrap.dedent("""
    import hashlib, sys, time
    from pathlib import Path
    from thrifty.transient.protocol import JobCheckpoints, PREEMPTED_EXIT
    steps, out = int(sys.argv[1]), Path(sys.argv[2])
    ckpt = JobCheckpoints.from_environment()
    saved = ckpt.latest()
    step, digest = (int(saved.split(b":")[0]), saved.split(b":")[1]) if saved else (0, b"seed")
    while step < steps:
        time.sleep(0.02)                      # one unit of work
        digest = hashlib.sha256(digest).hexdigest().encode()
        step += 1
        if ckpt.due():
            ckpt.save(b"%d:%s" % (step, digest))
            if ckpt.notice:
                ckpt.close()
                sys.exit(PREEMPTED_EXIT)
    ckpt.close()
    out.write_text(f"{step} {digest.decode()}")
""")


MEASURED_JOB = textwrap.dedent("""
    import sys, time
    from thrifty.transient.protocol import JobCheckpoints
    startup_s, checkpoint_s, wanted = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    time.sleep(startup_s)                       # the restart: imports, reading the checkpoint
    ckpt = JobCheckpoints.from_environment()
    ckpt.latest()
    ckpt.working()
    def checkpoint():
        began = time.monotonic()
        time.sleep(checkpoint_s)                # what this job's checkpoints cost
        ckpt.save(b"state", began_s=began)
    checkpoint()                                # one unasked, at once: the first measurement
    served = 0
    while served < wanted:                      # done after `wanted` requests
        time.sleep(0.01)
        if ckpt.due():
            checkpoint()
            served += 1
    ckpt.close()
""")


def _expected(steps: int) -> str:
    import hashlib
    digest = b"seed"
    for _ in range(steps):
        digest = hashlib.sha256(digest).hexdigest().encode()
    return f"{steps} {digest.decode()}"


@pytest.fixture()
def job(tmp_path) -> Path:
    path = tmp_path / "job.py"
    path.write_text(COUNTER_JOB)
    return path


@pytest.mark.timeout(240)
@pytest.mark.parametrize("kill", ["sigkill", "mixed"])
def test_runner_survives_injected_preemptions(tmp_path, job, kill, caplog):
    # mutation caught (logging): an event written to events.jsonl but not logged, or logged at debug
    # where `thrifty run -v` should show it
    import logging
    caplog.set_level(logging.INFO, logger="thrifty.transient.runner")
    out = tmp_path / "result.txt"
    runner = Runner([sys.executable, str(job), "400", str(out)], tmp_path / "ck", intervals_s=[0.3],
                    notice_s=2.0, lifetimes=Exponential(1 / 1.5), time_scale=1.0, kill=kill, seed=4,
                    timeout_s=200)
    report = runner.run()
    assert report.exit_code == 0 and out.read_text() == _expected(400)
    assert report.preemptions >= 2 and report.checkpoints >= 2 and report.attempts == report.preemptions + 1
    kinds = [json.loads(line)["event"] for line in (tmp_path / "ck" / "events.jsonl").read_text().splitlines()]
    assert {"start", "checkpoint_request", "checkpoint", "preemption", "restart", "finished"} <= set(kinds)
    said = [r.getMessage().split()[0] for r in caplog.records if r.levelno == logging.INFO]
    assert said == [k for k in kinds if k in {"start", "preemption_notice", "preemption", "restart", "finished"}]
    if kill == "mixed":
        assert report.notices >= 1


def test_a_corrupt_newest_checkpoint_falls_back_to_the_previous(tmp_path):
    ckpt = JobCheckpoints(tmp_path, handle_signals=False)
    ckpt.save(b"first")
    ckpt.save(b"second")
    newest = checkpoint_files(tmp_path)[-1]
    newest.write_bytes(newest.read_bytes()[:-3])  # torn write
    assert ckpt.latest() == b"first" and ckpt.skipped == [newest.name]
    (tmp_path / "ckpt-000009.bin").write_bytes(encode(b"ninth")[:10])
    assert ckpt.latest() == b"first"
    for _ in range(4):
        ckpt.save(b"more")
    assert len(checkpoint_files(tmp_path)) == 3  # only the newest few are kept


@pytest.mark.timeout(120)
def test_a_notice_to_the_runner_checkpoints_within_the_notice(tmp_path, job):
    out = tmp_path / "result.txt"
    runner = Runner([sys.executable, str(job), "100000", str(out)], tmp_path / "ck", intervals_s=[1000.0],
                    notice_s=10.0)
    timer = threading.Timer(3.0, lambda: os.kill(os.getpid(), signal.SIGTERM))
    timer.start()
    report = runner.run()
    timer.cancel()
    assert report.exit_code == PREEMPTED_EXIT and report.notices == 1
    assert report.checkpoints == 1 and len(checkpoint_files(tmp_path / "ck")) == 1


def test_a_job_that_fails_on_its_own_stops_the_runner_with_its_exit_code(tmp_path):
    # mutations caught: the failure restarted (as a stop from outside), or raised as the runner's own
    # error (the CLI's exit 2: a wrapper hiding the job's code and its run's summary)
    report = Runner([sys.executable, "-c", "import sys; sys.exit(3)"], tmp_path / "ck").run()
    assert (report.exit_code, report.attempts, report.failure) == (3, 1, "the job failed on its own (exit code 3)")
    report = Runner([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"],
                    tmp_path / "ck2").run()
    assert (report.exit_code, report.failure) == (139, "the job failed on its own (killed by SIGSEGV)")
    assert shell_exit_code(-9) == 137 and shell_exit_code(0) == 0
    events = [json.loads(line)["event"] for line in (tmp_path / "ck" / "events.jsonl").read_text().splitlines()]
    assert events[-1] == "failed"


def test_a_job_stopping_itself_again_and_again_without_a_checkpoint_is_failing(tmp_path):
    # mutation caught: the guard removed (restarted until max_restarts: 10,000 by default, 114 s of
    # a tight loop in a new user's hands)
    runner = Runner([sys.executable, "-c", f"import sys; sys.exit({PREEMPTED_EXIT})"], tmp_path / "ck", max_restarts=20)
    with pytest.raises(RunnerError, match="stopped itself 5 times in a row .exit code 75. with no checkpoint"):
        runner.run()
    starts = [e for e in map(json.loads, (tmp_path / "ck" / "events.jsonl").read_text().splitlines())
              if e["event"] == "start"]
    assert len(starts) == 5


@pytest.mark.timeout(120)
def test_emulated_vms_that_die_before_every_first_checkpoint_stop_the_run_in_one_line(tmp_path, scripted_lifetimes):
    """Lives of 5 ms never let the job save: after 20 in a row the run says why (a new user's --time-scale
    1e6 made 786 attempts in 59 s and went on). Mutation caught: the fruitless count not kept."""
    runner = Runner([sys.executable, "-c", "import time; time.sleep(60)"], tmp_path / "ck", intervals_s=[1000.0],
                    lifetimes=scripted_lifetimes([0.005]), kill="sigkill", timeout_s=100)
    with pytest.raises(RunnerError, match="20 emulated VMs in a row died before the job wrote a checkpoint"):
        runner.run()


@pytest.mark.timeout(200)
def test_a_job_keeping_its_own_state_is_not_taken_for_a_fruitless_one(tmp_path, scripted_lifetimes, monkeypatch):
    """A job that saves its own state.json on the notice (docs/preemption.md) writes no ckpt-*.bin: its
    many lives of a second are progress, not VMs dying before a first checkpoint (a review; mutation caught: the
    fruitless count kept for a job that never wrote the ready file)."""
    job = tmp_path / "own_state.py"
    job.write_text("import json, os, signal, sys, time\nfrom pathlib import Path\n"
                   "state = Path(os.environ['THRIFTY_CHECKPOINT_DIR']) / 'state.json'\n"
                   "done = json.loads(state.read_text())['done'] if state.exists() else 0\n"
                   "def on_term(*_):\n    state.write_text(json.dumps({'done': done})); sys.exit(75)\n"
                   "signal.signal(signal.SIGTERM, on_term)\n"
                   "while done < 600:\n    time.sleep(0.01); done += 1\n")
    monkeypatch.setattr("thrifty.transient.runner.MAX_FRUITLESS_PREEMPTIONS", 3)  # 20 lives of a second: a slow test
    report = Runner([sys.executable, str(job)], tmp_path / "ck", lifetimes=scripted_lifetimes([FRUITLESS_LIFE_S + 0.1]),
                    kill="sigterm", notice_s=0.1, timeout_s=100).run()
    assert report.exit_code == 0 and report.attempts > 3


@pytest.mark.timeout(300)
def test_thrifty_train_noticed_before_its_run_starts_is_restarted_not_failed(tmp_path, scripted_lifetimes, monkeypatch):
    """Under the runner a SIGTERM to train in its first seconds is the runner's notice: the attempt dies
    of it and the next one trains (a review: train stopping on it with 143 read as the job's own failure;
    mutation caught: cli.app's early stop taken under a runner too)."""
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    report = Runner([sys.executable, "-m", "thrifty.cli", "train", "--nproc", "1", "--steps", "20", "--run-dir",
                     str(tmp_path / "run"), "--db", str(tmp_path / "t.db")], tmp_path / "ck",
                    lifetimes=scripted_lifetimes([2.0, 1000.0]), kill="sigterm", notice_s=0.5, timeout_s=250).run()
    assert report.exit_code == 0 and report.attempts == 2, report


def test_a_killed_runners_stale_ready_files_are_cleared_before_the_job_starts(tmp_path):
    """A SIGKILLed runner's job leaves `.ready-PID`; a new job given that pid would be signalled before its
    handlers are in (SIGUSR1 kills it). Mutation caught: the stale files kept."""
    folder = tmp_path / "ck"
    folder.mkdir()
    stale = folder / ".ready-4194000"
    stale.touch()
    assert Runner([sys.executable, "-c", "pass"], folder).run().exit_code == 0
    assert not stale.exists()


def test_a_job_that_checkpoints_before_each_stop_is_restarted_until_it_finishes(tmp_path):
    # mutation caught: the guard counting stops without looking for checkpoints (6 stops: given up)
    job = textwrap.dedent(f"""
        import os, pathlib, sys
        folder = pathlib.Path(os.environ["THRIFTY_CHECKPOINT_DIR"])
        saved = len(list(folder.glob("ckpt-*.bin")))
        if saved < 6:
            (folder / f"ckpt-{{saved:04d}}.bin").write_bytes(b"work")
            sys.exit({PREEMPTED_EXIT})
    """)
    report = Runner([sys.executable, "-c", job], tmp_path / "ck").run()
    assert report.exit_code == 0 and report.attempts == 7 and report.checkpoints == 6
    # each stop said and counted (mutation caught: restarted in silence, "preemptions 0" the only count)
    assert report.stops == 6 and report.summary()["stops"] == 6
    stopped = [e for e in report.events if e["event"] == "stopped"]
    assert stopped[0]["how"] == f"exit code {PREEMPTED_EXIT}"


def test_a_job_killed_from_outside_is_said_and_its_work_since_the_checkpoint_counted_lost(tmp_path):
    """kill -9 of the job 0.26 s after a checkpoint was restarted in silence with 0 s lost. Mutation
    caught: the lost work of a stop the runner did not cause left out."""
    job = textwrap.dedent("""
        import os, pathlib, signal, sys, time
        folder = pathlib.Path(os.environ["THRIFTY_CHECKPOINT_DIR"])
        if not list(folder.glob("ckpt-*.bin")):
            (folder / "ckpt-0001.bin").write_bytes(b"work")
            time.sleep(1.0)  # work after the checkpoint, then a kill from outside
            os.kill(os.getpid(), signal.SIGKILL)
    """)
    report = Runner([sys.executable, "-c", job], tmp_path / "ck").run()
    assert report.exit_code == 0 and report.stops == 1 and report.preemptions == 0
    assert [e["how"] for e in report.events if e["event"] == "stopped"] == ["killed by SIGKILL"]
    assert report.lost_work_s >= 0.5


def test_run_cli_errors(tmp_path, run_cli):
    """The first in its own process (what a shell sees), the others in this one (run_cli)."""
    done = subprocess.run([sys.executable, "-m", "thrifty.cli", "run", "--checkpoint-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "no command to run" in done.stderr
    code, _, err = run_cli("run", "--checkpoint-dir", tmp_path, "--kill", "gently", "--", sys.executable, "-c", "pass")
    assert code == 2 and "unknown kill mode" in err
    # mutation caught: --kill accepted without --inject, where nothing is preempted (silently ignored)
    code, _, err = run_cli("run", "--checkpoint-dir", tmp_path, "--kill", "sigterm", "--", sys.executable, "-c", "pass")
    assert code == 2 and "--kill sigterm chooses how injected preemptions end a VM: give --inject" in err
    # mutations caught: options after the command's first word read as the runner's (`--seed 3` taken
    # as the injection seed), and an unknown runner option taken for the command
    argv = tmp_path / "argv.json"
    code, out, _ = run_cli("run", "--checkpoint-dir", tmp_path / "argv", sys.executable, "-c",
                           f"import json, sys; open({str(argv)!r}, 'w').write(json.dumps(sys.argv[1:]))",
                           "--seed", "3", "--json")
    assert code == 0 and json.loads(argv.read_text()) == ["--seed", "3", "--json"] and out.startswith("exit 0")
    code, _, err = run_cli("run", "--chekpoint-dir", tmp_path, "--", sys.executable, "-c", "pass")
    assert code == 2 and "No such option: --chekpoint-dir" in err
    # the job's own failure: its exit code, the summary (valid JSON) and one line of why on stderr
    code, out, err = run_cli("run", "--checkpoint-dir", tmp_path / "fails", "--json", "--", sys.executable, "-c",
                             "import sys; sys.exit(5)")
    assert code == 5 and json.loads(out)["failure"] == "the job failed on its own (exit code 5)"
    assert err.strip().splitlines()[-1] == \
        f"error: the job failed on its own (exit code 5); see {tmp_path / 'fails' / 'events.jsonl'}"
    code, _, err = run_cli("md", "run", "--system", "water", "--out", tmp_path)
    assert code == 2 and "unknown MD system" in err
    # mutation caught: a folder of other files taken (events.jsonl and checkpoints written among them)
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "notes.txt").write_text("mine")
    code, _, err = run_cli("run", "--checkpoint-dir", tmp_path / "project", "--", sys.executable, "-c", "pass")
    assert code == 2 and "holds files that are not checkpoints (notes.txt)" in err
    assert sorted(p.name for p in (tmp_path / "project").iterdir()) == ["notes.txt"]
    # a job that keeps its own state in the folder: the same command again is its restart (a new
    # user's pass: refused for its state.json). Mutation caught: the earlier run's folder not told apart
    own = [sys.executable, "-c", "import os, pathlib; "
           "pathlib.Path(os.environ['THRIFTY_CHECKPOINT_DIR'], 'state.json').write_text('{}')"]
    for _ in range(2):
        code, _, err = run_cli("run", "--checkpoint-dir", tmp_path / "own", "--", *own)
        assert code == 0, err


@pytest.mark.timeout(120)
def test_a_sigterm_to_the_whole_process_group_is_a_notice_not_a_stop_from_outside(tmp_path):
    # `timeout -s TERM`, docker stop and systemd signal the runner and the job together. Mutation
    # caught: the job's SIGTERM death read first as a stop from outside (restarted once, then the
    # runner's notice: 2 attempts and a "stopped" event)
    runner = subprocess.Popen([sys.executable, "-m", "thrifty.cli", "run", "--checkpoint-dir", str(tmp_path / "ck"),
                               "--json", "--", sys.executable, "-c", "import time; time.sleep(60)"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    events = tmp_path / "ck" / "events.jsonl"
    deadline = time.monotonic() + 60
    while not (events.exists() and '"start"' in events.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    os.killpg(runner.pid, signal.SIGTERM)
    out, err = runner.communicate(timeout=60)
    summary = json.loads(out)
    assert runner.returncode == PREEMPTED_EXIT, err
    assert (summary["attempts"], summary["stops"], summary["notices"]) == (1, 0, 1)


@pytest.mark.timeout(120)
def test_a_ctrl_c_is_a_notice_the_job_saves_on(tmp_path, job):
    """A terminal's Ctrl-C (SIGINT to the foreground process group: the runner and its job) used to
    end the runner at once ("error: interrupted", exit 130) and kill the job: its work since the last
    checkpoint, up to a whole interval, was lost. Now both take it as the notice: the job saves and
    the run exits 75. Mutations caught: no SIGINT handler in the runner (exit 130, nothing saved);
    none in JobCheckpoints (the Ctrl-C kills the job before it saves)."""
    ck = tmp_path / "ck"
    runner = subprocess.Popen([sys.executable, "-m", "thrifty.cli", "run", "--checkpoint-dir", str(ck), "--json",
                               "--", sys.executable, str(job), "100000", str(tmp_path / "out.txt")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 60
    while not list(ck.glob(".ready-*")) and time.monotonic() < deadline:
        assert runner.poll() is None, runner.communicate()
        time.sleep(0.05)
    os.killpg(runner.pid, signal.SIGINT)  # as a terminal sends it
    out, err = runner.communicate(timeout=60)
    assert runner.returncode == PREEMPTED_EXIT, err
    summary = json.loads(out)
    assert (summary["attempts"], summary["notices"], summary["checkpoints"]) == (1, 1, 1)
    assert len(checkpoint_files(ck)) == 1 and not list(ck.glob(".ready-*"))


@pytest.mark.timeout(120)
def test_a_notice_while_a_vm_lives_out_its_life_starts_no_new_attempt(tmp_path, job, scripted_lifetimes):
    """The job stops on its injected notice at 2 s and its VM lives to 3 s; a SIGTERM to the runner
    at 2.5 s is the run's end: it had started a new attempt only to stop it before its handlers
    were in (a review). Mutation caught: the notice not checked before a start (2 attempts)."""
    timer = threading.Timer(2.5, lambda: os.kill(os.getpid(), signal.SIGTERM))
    timer.start()
    report = Runner([sys.executable, str(job), "100000", str(tmp_path / "out.txt")], tmp_path / "ck",
                    intervals_s=[1000.0], notice_s=1.0, lifetimes=scripted_lifetimes([3.0, float("inf")]),
                    kill="sigterm", timeout_s=100).run()
    timer.cancel()
    assert report.exit_code == PREEMPTED_EXIT and report.attempts == 1 and report.checkpoints == 1


@pytest.mark.timeout(120)
def test_the_runner_plans_again_with_the_checkpoint_and_restart_costs_the_job_measured(tmp_path):
    """A job that takes 0.6 s to start and 0.05 s per checkpoint, against an assumed 5 s checkpoint
    and 0.1 s restart: on the assumed costs the DP asks for no checkpoint in the 8 s job (a
    24 h VM lives 10 s here), so the job, which stops after its third request, finishes only on
    the intervals planned from what it measured. Mutations caught: the reported checkpoint cost
    ignored, or the restart's; the job's reports not read; intervals planned but not used."""
    _, model = load_model("gcp-2019")
    scale = 86_400 / 10
    job = tmp_path / "job.py"
    job.write_text(MEASURED_JOB)
    schedule = AdaptiveSchedule(model, checkpoint_cost_s=5.0, restart_cost_s=0.1, work_s=8.0, time_scale=scale)
    report = Runner([sys.executable, str(job), "0.6", "0.05", "3"], tmp_path / "ck", schedule=schedule,
                    timeout_s=60).run()
    assert report.exit_code == 0
    reported = [json.loads(line)["cost_s"] for line in (tmp_path / "ck" / REPORTS).read_text().splitlines()
                if json.loads(line)["event"] == "checkpoint"]
    assert report.checkpoint_costs_s == reported and min(reported) >= 0.05  # the job's own numbers
    assert len(report.restart_costs_s) == 1 and report.restart_costs_s[0] >= 0.6
    plans = [e for e in report.events if e["event"] == "plan"]
    assert (plans[0]["checkpoint_cost_s"], plans[0]["restart_cost_s"]) == (5.0, 0.1)
    medians = [statistics.median(reported[:n]) for n in range(1, len(reported) + 1)]
    assert plans[-1]["checkpoint_cost_s"] in medians
    for plan in plans[1:]:  # each from the medians of what was measured by then (the restart first)
        assert plan["checkpoint_cost_s"] in [5.0, *medians]
        assert plan["restart_cost_s"] == report.restart_costs_s[0]
        dp = plan_schedule(model, Job(8.0 * scale, plan["checkpoint_cost_s"] * scale, plan["restart_cost_s"] * scale,
                                      restart_ages_vm=True), "dp")
        young = young_interval_s(plan["checkpoint_cost_s"] * scale, model.mean())
        assert plan["intervals_s"] == [i / scale for i in [*dp.intervals_s[:-1], max(dp.intervals_s[-1], young), young]]
    assert sum(e["event"] == "checkpoint_request" for e in report.events) == 3


@pytest.mark.timeout(120)
def test_an_injected_notice_comes_before_the_vms_end_and_the_vm_lives_it_out(tmp_path, job, scripted_lifetimes):
    """A VM that lives 3 s gives its notice 1 s before the end, as a cloud warns before it takes a
    VM back: the job saves and stops, and the restart waits for the VM's end. Mutations caught:
    the notice sent when the VM ends (the job then saves after the preemption); the next attempt
    started as soon as the warned job stopped."""
    out = tmp_path / "result.txt"
    report = Runner([sys.executable, str(job), "400", str(out)], tmp_path / "ck", intervals_s=[1000.0],
                    notice_s=1.0, lifetimes=scripted_lifetimes([3.0, float("inf")]), kill="sigterm",
                    timeout_s=100).run()
    assert report.exit_code == 0 and out.read_text() == _expected(400)
    assert (report.preemptions, report.notices, report.checkpoints) == (1, 1, 1)
    kinds = ("start", "preemption_notice", "checkpoint", "preemption")
    first = [e for e in report.events if e.get("attempt") == 1 and e["event"] in kinds]
    assert [e["event"] for e in first] == list(kinds)
    assert first[-1]["t_s"] - first[0]["t_s"] >= 3.0  # the whole life, though the job left at the notice
    step = int(decode((tmp_path / "ck" / "ckpt-000001.bin").read_bytes()).split(b":")[0])
    assert 0 < step < 400  # saved on the notice, and the second VM went on from there


FINISH_ON_NOTICE_JOB = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from thrifty.transient.protocol import JobCheckpoints
    ckpt = JobCheckpoints.from_environment()
    print('{"job": "started"}', flush=True)     # the job's own stdout: not the runner's report
    while not ckpt.notice:
        time.sleep(0.01)
    time.sleep(0.3)                             # the last of its work, inside the notice
    ckpt.close()
    Path(sys.argv[1]).write_text("done")
""")


@pytest.fixture()
def finishing_job(tmp_path) -> Path:
    path = tmp_path / "finish.py"
    path.write_text(FINISH_ON_NOTICE_JOB)
    return path


@pytest.mark.timeout(120)
def test_a_job_that_finishes_within_the_runners_notice_is_done_not_preempted(tmp_path, finishing_job):
    """The runner's own SIGTERM is forwarded; the job completes and exits 0 within the 10 s
    notice. Mutation caught: exit 0 in the window treated as preempted (the runner exits 75,
    "restart me", for a job that finished)."""
    out = tmp_path / "done.txt"
    runner = Runner([sys.executable, str(finishing_job), str(out)], tmp_path / "ck", notice_s=10.0)
    timer = threading.Timer(2.0, lambda: os.kill(os.getpid(), signal.SIGTERM))
    timer.start()
    report = runner.run()
    timer.cancel()
    assert out.read_text() == "done"
    assert (report.exit_code, report.attempts, report.notices, report.preemptions) == (0, 1, 1, 0)
    assert [e["event"] for e in report.events][-1] == "finished"


@pytest.mark.timeout(120)
def test_a_job_that_finishes_within_an_injected_notice_is_not_restarted(tmp_path, finishing_job, scripted_lifetimes):
    """A VM of 8 s warns 2 s before its end (the job has started and listens by then, even on a
    loaded machine); the job finishes (exit 0) on the warning. Mutation caught: exit 0 in the window
    treated as preempted (a second attempt is started)."""
    out = tmp_path / "done.txt"
    report = Runner([sys.executable, str(finishing_job), str(out)], tmp_path / "ck", notice_s=2.0,
                    lifetimes=scripted_lifetimes([8.0]), kill="sigterm", timeout_s=60).run()
    assert out.read_text() == "done"
    assert (report.exit_code, report.attempts, report.notices, report.preemptions) == (0, 1, 1, 0)
    assert "restart" not in {e["event"] for e in report.events}


@pytest.mark.timeout(120)
def test_run_json_prints_one_document_the_runners(tmp_path):
    """`thrifty run --json` over a job that prints JSON of its own: stdout is exactly one JSON
    document, the runner's report; the job's line is on stderr. Mutation caught: the job's stdout
    inherited (json.loads fails on the extra document)."""
    done = subprocess.run([sys.executable, "-m", "thrifty.cli", "run", "--json", "--checkpoint-dir", str(tmp_path / "ck"),
                           "--", sys.executable, "-c", "print('{\"job\": \"done\"}')"],
                          check=False, capture_output=True, text=True, timeout=100)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["exit_code"], report["attempts"]) == (0, 1)
    assert '{"job": "done"}' in done.stderr
    # without --json, piped: the summary is one line however long (it wrapped at 80 columns)
    done = subprocess.run([sys.executable, "-m", "thrifty.cli", "run", "--checkpoint-dir", str(tmp_path / "ck2"),
                           "--", sys.executable, "-c", "pass"], check=False, capture_output=True, text=True, timeout=100)
    assert done.returncode == 0, done.stderr
    [summary] = done.stdout.strip().splitlines()
    assert summary.startswith("exit 0 after") and summary.endswith("events.jsonl") and len(summary) > 80


@pytest.mark.timeout(120)
def test_a_second_runner_on_a_checkpoint_folder_in_use_is_refused(tmp_path):
    # mutation caught: no lock (two jobs wrote ckpt-000001... into one folder, each runner counting
    # the other's checkpoints, and a restart would resume the other job's state)
    go = tmp_path / "go"
    waiting = f"import pathlib, time\nwhile not pathlib.Path({str(go)!r}).exists(): time.sleep(0.02)"
    first = subprocess.Popen([sys.executable, "-m", "thrifty.cli", "run", "--checkpoint-dir", str(tmp_path / "ck"),
                              "--", sys.executable, "-c", waiting], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        events = tmp_path / "ck" / "events.jsonl"
        while not (events.exists() and '"start"' in events.read_text()):
            assert first.poll() is None, first.communicate()
            time.sleep(0.05)
        before = events.read_text()
        with pytest.raises(RunnerError, match=re.escape(f"checkpoint folder {tmp_path / 'ck'} is in use by another "
                                                        f"thrifty run (pid {first.pid}): give each job its own "
                                                        "--checkpoint-dir")):
            Runner([sys.executable, "-c", "pass"], tmp_path / "ck").run()
        assert events.read_text() == before  # nothing of the refused runner's in the folder's log
    finally:
        go.touch()
        first.communicate(timeout=60)
    assert first.returncode == 0
    assert Runner([sys.executable, "-c", "pass"], tmp_path / "ck").run()  # free again once it ended


def test_a_folder_in_use_is_refused_as_in_use_before_its_files_are_judged(tmp_path):
    """A runner's folder holds, for a moment, a checkpoint being written or pruned, and its job's
    files: a second runner must say the folder is in use, not that none of its checkpoints is
    intact. Mutation caught: the folder checked before the lock is taken ("none is intact")."""
    folder = tmp_path / "ck"
    folder.mkdir()
    (folder / "ckpt-000001.bin").write_bytes(b"half written")
    held = open_lock(folder / LOCK_NAME, "test")
    take(held, "test")
    write_holder(held)
    try:
        with pytest.raises(RunnerError, match="is in use by another thrifty run"):
            Runner([sys.executable, "-c", "pass"], folder).run()
    finally:
        held.close()
    # free, the same folder is judged by its files, and the refusal leaves it as it was
    # (mutation caught: the refused runner's lock file left behind)
    (folder / LOCK_NAME).unlink()
    with pytest.raises(ThriftyError, match="none is intact"):
        Runner([sys.executable, "-c", "pass"], folder).run()
    assert sorted(p.name for p in folder.iterdir()) == ["ckpt-000001.bin"]


def test_a_runner_killed_outright_gives_its_job_the_notice(tmp_path):
    """A runner SIGKILLed (its VM's agent gone, kill -9) cannot stop its job itself: the kernel's
    parent-death signal gives the job SIGTERM, the runner's notice, so it stops instead of running
    on alone beside the next runner of its folder. Mutation caught: the job launched without it
    (it was reparented and ran on; a second runner was then let into the folder)."""
    job = tmp_path / "job.py"
    job.write_text(textwrap.dedent("""
        import os, signal, sys, time
        signal.signal(signal.SIGTERM, lambda *_: (open(sys.argv[1] + ".term", "w").close(), sys.exit(75)))
        open(sys.argv[1], "w").write(str(os.getpid()))
        time.sleep(120)
    """))
    pid_file = tmp_path / "job.pid"
    runner = subprocess.Popen([sys.executable, "-m", "thrifty.cli", "run", "--checkpoint-dir", str(tmp_path / "ck"),
                               "--", sys.executable, str(job), str(pid_file)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not (pid_file.exists() and pid_file.read_text()):
        assert runner.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    job_pid = int(pid_file.read_text())
    runner.kill()
    runner.wait(timeout=30)
    deadline = time.monotonic() + 30
    while not Path(f"{pid_file}.term").exists():
        assert time.monotonic() < deadline, "the orphaned job got no notice"
        time.sleep(0.05)
    while _alive(job_pid):
        assert time.monotonic() < deadline, "the orphaned job ran on"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie that nobody reaped has ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_job_that_outlasts_its_stated_length_is_still_asked_to_checkpoint():
    """A 0.5 h job on 24 h VMs needs no checkpoint by the DP; if it runs on past 0.5 h the runner
    asks at Young's interval. Mutation caught: the DP's intervals alone (a job that outlasted its
    --job-hours was asked nothing more: 0 checkpoints in 16 model hours)."""
    _, model = load_model("gcp-2019")
    schedule = AdaptiveSchedule(model, checkpoint_cost_s=60.0, restart_cost_s=60.0, work_s=1800.0)
    young = young_interval_s(60.0, model.mean())
    assert schedule.intervals_s[-1] == pytest.approx(young) and young < 20 * 3600
    assert schedule.intervals_s[0] >= 1800.0  # none before the stated end
    long = AdaptiveSchedule(model, checkpoint_cost_s=60.0, restart_cost_s=60.0, work_s=20 * 3600.0)
    assert len(long.intervals_s) > 2 and long.intervals_s[-1] == pytest.approx(young)


SLOW_START_JOB = textwrap.dedent("""
    import sys, time
    from thrifty.transient.protocol import JobCheckpoints
    time.sleep(1.0)                             # the restart: imports, reading the checkpoint
    ckpt = JobCheckpoints.from_environment()
    ckpt.latest()
    ckpt.working()
    time.sleep(float(sys.argv[1]))              # the work, never checkpointed here
    ckpt.close()
""")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("lives, starting", [([4.0, 0.5], 2), ([0.5, 4.0], 1)])
def test_work_lost_counts_from_the_end_of_the_restart_not_the_start(tmp_path, scripted_lifetimes, lives, starting):
    # mutation caught: an attempt preempted while still starting counted as work lost (94 such
    # restarts of a finished job had reported 148 s of work lost, all of it start-up), the first
    # attempt too, before any attempt has said the job reports the end of its restarts
    path = tmp_path / "slow.py"
    path.write_text(SLOW_START_JOB)
    # one VM lives past the job's start-up and dies in its work; another dies in the start-up
    report = Runner([sys.executable, str(path), "5.5"], tmp_path / "ck", intervals_s=[1000.0],
                    lifetimes=scripted_lifetimes([*lives, float("inf")]), timeout_s=100).run()
    assert report.exit_code == 0 and report.preemptions == 2
    events = {(e.get("attempt"), e["event"]): e["t_s"] for e in report.events}
    working = 3 - starting  # the attempt that got to its work
    assert (starting, "working") not in events and (working, "working") in events
    in_work = events[(working, "preemption")] - events[(working, "working")]
    assert report.lost_work_s == pytest.approx(in_work, abs=0.2)


class _FixedLives:
    """Every VM lives `life_s` (model seconds)."""

    def __init__(self, life_s: float) -> None:
        self.life_s = life_s

    def sample(self, rng, size, age=0.0):
        return np.full(size, self.life_s)


@pytest.mark.timeout(120)
def test_a_notice_longer_than_the_vms_life_waits_for_the_jobs_handlers(tmp_path, job, caplog):
    """A new user's pass: on a compressed clock whose VMs live less than the notice, the notice went
    out as each attempt started, before the job's handlers were in: every attempt died at once, 24
    attempts in 199 s with no checkpoint. The notice now waits for the job's ready file (half the
    VM's life at most for a job not known to write one), so each attempt saves, and the mismatch is
    said up front. Mutations caught: the notice at its time whatever the job (the run gives up);
    the warning dropped."""
    import logging
    caplog.set_level(logging.WARNING, logger="thrifty.transient.runner")
    out = tmp_path / "result.txt"
    report = Runner([sys.executable, str(job), "4", str(out)], tmp_path / "ck", notice_s=30.0,
                    lifetimes=_FixedLives(2.0), kill="sigterm", max_restarts=12, intervals_s=[1000.0],
                    timeout_s=100).run()
    assert report.exit_code == 0 and out.read_text() == _expected(4)
    assert report.checkpoints >= 1 and report.notices >= 1
    assert any("is at least half the median VM life" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("command, launches", [
    ("torchrun --standalone -m thrifty.train", True),
    ("env OMP_NUM_THREADS=2 torchrun -m thrifty.train", True),
    ("env -u X torchrun -m thrifty.train", True),
    ("env -i -- /usr/bin/torchrun x.py", True),
    ("nice -n 5 torchrun -m thrifty.train", True),
    ("uv run torchrun -m thrifty.train", True),
    ("python -m torch.distributed.run -m thrifty.train", True),
    ("python3 -mtorch.distributed.launch train.py", True),
    ("python -m thrifty.train --workload torchrun", False),
    ("python train.py -m torch.distributed.run", False),
    ("python torchrun_helper.py", False),
    ("bash job.sh", False),
])
def test_torchrun_as_the_job_is_told_from_a_job_that_mentions_it(command, launches):
    """A review found `env -u X torchrun`, `nice ... torchrun`, `-mtorch.distributed.launch` let
    through and a script's own `-m torch.distributed.run` argument refused. Mutation caught: the
    first version's rule (the first word not an assignment)."""
    from thrifty.transient.runner import _launches_torchrun
    assert _launches_torchrun(command.split()) is launches
